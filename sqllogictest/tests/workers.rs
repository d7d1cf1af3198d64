//! Views on workers (`--workers`): a join, a GROUP BY, a top-N and an OVER window created on
//! four workers keep four instances each (four state tables per table an operator has), answer
//! like their queries in batch through updates that move rows between keys (and so between
//! instances), and go on doing so after a kill -9 and a restart on one worker; a view created
//! then runs on one.

use eddy_sqllogictest::rows::text_rows;
use eddy_sqllogictest::EddyProcess;
use tokio_postgres::Client;

const VIEWS: [(&str, &str); 4] = [
    (
        "order_names",
        "SELECT o.id, c.name, o.amount FROM orders o LEFT JOIN customers c ON o.customer = c.id",
    ),
    (
        "per_customer",
        "SELECT customer, count(*) AS n, sum(amount) AS total FROM orders GROUP BY customer",
    ),
    (
        "top_orders",
        "SELECT customer, id, amount FROM (SELECT customer, id, amount, ROW_NUMBER() OVER \
         (PARTITION BY customer ORDER BY amount DESC, id) AS r FROM orders) t WHERE r <= 2",
    ),
    (
        "running",
        "SELECT id, customer, sum(amount) OVER (PARTITION BY customer ORDER BY id) AS upto \
         FROM orders",
    ),
];

/// The rows `sql` answers, sorted.
async fn rows(client: &Client, sql: &str) -> Vec<Vec<String>> {
    let mut rows = text_rows(client, sql).await;
    rows.sort();
    rows
}

/// Every view against its query run in batch over the tables.
async fn check_views(client: &Client, views: &[(&str, &str)]) {
    for (name, query) in views {
        let view = rows(client, &format!("SELECT * FROM {name}")).await;
        let batch = rows(client, query).await;
        assert!(!view.is_empty(), "{name} is empty");
        assert_eq!(view, batch, "{name} differs from its query");
    }
}

/// How many state tables each view's operators have, by view.
async fn state_tables(client: &Client) -> Vec<Vec<String>> {
    rows(
        client,
        "SELECT view, operator, count(*) FROM eddy_catalog.state_tables GROUP BY 1, 2",
    )
    .await
}

/// Inserts orders `from..=to` and moves some existing ones to other customers.
async fn change(client: &Client, from: i64, to: i64) {
    client
        .batch_execute(&format!(
            "INSERT INTO orders SELECT n, n % 37, (n * 7919) % 1000 FROM generate_series({from}, {to}) AS t(n);
             UPDATE orders SET customer = (customer + 5) % 41 WHERE id % 11 = {};
             DELETE FROM orders WHERE id % 97 = {};
             UPDATE customers SET name = name || '+' WHERE id % 7 = {};",
            from % 11,
            from % 97,
            from % 7
        ))
        .await
        .unwrap();
}

#[tokio::test]
async fn views_keep_their_workers_and_answers_across_a_crash() {
    let mut eddy = EddyProcess::start_fresh_with(|config| {
        config.extra_args = vec!["--workers".into(), "4".into()];
    })
    .await
    .unwrap();
    let (client, _driver) = eddy.connect().await.unwrap();
    client
        .batch_execute(
            "CREATE TABLE customers (id INT PRIMARY KEY, name TEXT);
             CREATE TABLE orders (id INT PRIMARY KEY, customer INT, amount INT);
             INSERT INTO customers SELECT n, 'customer ' || n FROM generate_series(0, 39) AS t(n);",
        )
        .await
        .unwrap();
    for (name, query) in VIEWS {
        client
            .batch_execute(&format!("CREATE MATERIALIZED VIEW {name} AS {query}"))
            .await
            .unwrap();
    }
    for round in 0..4 {
        change(&client, round * 300 + 1, round * 300 + 300).await;
    }
    check_views(&client, &VIEWS).await;
    let on_four = state_tables(&client).await;
    let count = |tables: &[Vec<String>], view: &str, operator: &str| {
        tables
            .iter()
            .find(|r| r[0] == view && r[1] == operator)
            .map(|r| r[2].clone())
    };
    assert_eq!(
        count(&on_four, "order_names", "join left").as_deref(),
        Some("4")
    );
    assert_eq!(
        count(&on_four, "order_names", "join right").as_deref(),
        Some("4")
    );
    assert!(
        on_four.iter().all(|r| r[2] == "4"),
        "every keyed operator runs as four instances: {on_four:?}"
    );

    drop(client);
    eddy.set_extra_args(vec!["--workers".into(), "1".into()]);
    eddy.restart().await.unwrap();
    let (client, _driver) = eddy.connect().await.unwrap();
    check_views(&client, &VIEWS).await;
    for round in 4..6 {
        change(&client, round * 300 + 1, round * 300 + 300).await;
    }
    check_views(&client, &VIEWS).await;
    assert_eq!(
        state_tables(&client).await,
        on_four,
        "the views kept their instances"
    );
    let workers = rows(
        &client,
        "SELECT name, workers FROM eddy_catalog.materialized_views",
    )
    .await;
    assert!(workers.iter().all(|r| r[1] == "4"), "{workers:?}");

    let (name, query) = VIEWS[0];
    client
        .batch_execute(&format!("CREATE MATERIALIZED VIEW {name}_again AS {query}"))
        .await
        .unwrap();
    let tables = state_tables(&client).await;
    assert_eq!(
        count(&tables, "order_names_again", "join left").as_deref(),
        Some("1")
    );
    let workers = rows(
        &client,
        "SELECT workers FROM eddy_catalog.materialized_views WHERE name = 'order_names_again'",
    )
    .await;
    assert_eq!(workers, [["1"]]);
    let again = rows(&client, "SELECT * FROM order_names_again").await;
    assert_eq!(again, rows(&client, query).await);
}
