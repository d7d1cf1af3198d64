// The PostgreSQL JDBC driver against a running eddy: DatabaseMetaData (getTables,
// getColumns, getPrimaryKeys, getTypeInfo, getProcedures, getImportedKeys, getVersionColumns,
// privileges) as BI tools browse a schema, getObject of an INTERVAL, and a PreparedStatement.
// Run by sqllogictest/tests/clients.rs as `java -cp postgresql.jar JdbcCheck.java` with
// EDDY_PORT set; exits non-zero on any mismatch.

import java.sql.Connection;
import java.sql.DatabaseMetaData;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.TreeSet;

public class JdbcCheck {
    static void check(String label, Object got, Object expected) {
        if (!Objects.equals(got, expected)) {
            System.err.println(label + ": expected " + expected + ", got " + got);
            System.exit(1);
        }
        System.out.println("ok: " + label);
    }

    public static void main(String[] args) throws Exception {
        String url = "jdbc:postgresql://127.0.0.1:" + System.getenv("EDDY_PORT") + "/dev";
        String user = Objects.requireNonNullElse(System.getenv("EDDY_USER"), "eddy");
        String password = Objects.requireNonNullElse(System.getenv("EDDY_PASSWORD"), "");
        try (Connection conn = DriverManager.getConnection(url, user, password)) {
            try (Statement st = conn.createStatement()) {
                st.execute("CREATE TABLE trades (id BIGINT PRIMARY KEY, symbol VARCHAR, qty INT, px DOUBLE)");
                st.execute("CREATE MATERIALIZED VIEW volume AS "
                        + "SELECT symbol, sum(qty) AS qty FROM trades GROUP BY symbol");
            }
            try (PreparedStatement insert = conn.prepareStatement("INSERT INTO trades VALUES (?, ?, ?, ?)")) {
                Object[][] rows = {{1L, "ABC", 10, 1.5}, {2L, "XYZ", 5, 20.0}, {3L, "ABC", 7, 1.75}};
                for (Object[] row : rows) {
                    insert.setLong(1, (Long) row[0]);
                    insert.setString(2, (String) row[1]);
                    insert.setInt(3, (Integer) row[2]);
                    insert.setDouble(4, (Double) row[3]);
                    check("PreparedStatement insert " + row[0], insert.executeUpdate(), 1);
                }
            }
            try (Statement st = conn.createStatement()) {
                st.execute("FLUSH");
            }
            try (PreparedStatement query = conn.prepareStatement(
                    "SELECT symbol, qty FROM volume WHERE symbol = ?")) {
                query.setString(1, "ABC");
                try (ResultSet rs = query.executeQuery()) {
                    check("PreparedStatement query has a row", rs.next(), true);
                    check("PreparedStatement query symbol", rs.getString("symbol"), "ABC");
                    check("PreparedStatement query qty", rs.getLong("qty"), 17L);
                    check("PreparedStatement query has one row", rs.next(), false);
                }
            }

            DatabaseMetaData meta = conn.getMetaData();
            check("getDatabaseProductName", meta.getDatabaseProductName(), "PostgreSQL");
            List<String> tables = new ArrayList<>();
            try (ResultSet rs = meta.getTables(null, "public", "%", new String[] {"TABLE"})) {
                while (rs.next()) {
                    tables.add(rs.getString("TABLE_NAME"));
                }
            }
            check("getTables TABLE", tables, List.of("trades"));
            List<String> views = new ArrayList<>();
            try (ResultSet rs = meta.getTables(null, "public", "%", new String[] {"MATERIALIZED VIEW"})) {
                while (rs.next()) {
                    views.add(rs.getString("TABLE_NAME"));
                }
            }
            check("getTables MATERIALIZED VIEW", views, List.of("volume"));
            List<String> columns = new ArrayList<>();
            try (ResultSet rs = meta.getColumns(null, "public", "trades", "%")) {
                while (rs.next()) {
                    columns.add(rs.getString("COLUMN_NAME") + " " + rs.getString("TYPE_NAME")
                            + " " + rs.getInt("NULLABLE"));
                }
            }
            check("getColumns", columns, List.of("id int8 0", "symbol varchar 1", "qty int4 1", "px float8 1"));
            List<String> keys = new ArrayList<>();
            try (ResultSet rs = meta.getPrimaryKeys(null, "public", "trades")) {
                while (rs.next()) {
                    keys.add(rs.getString("COLUMN_NAME") + " " + rs.getInt("KEY_SEQ") + " " + rs.getString("PK_NAME"));
                }
            }
            check("getPrimaryKeys", keys, List.of("id 1 trades_pkey"));

            // getTypeInfo and the driver's type lookups compare pg_type's regproc columns
            // (typinput = 'array_in'::regproc).
            List<String> types = new ArrayList<>();
            try (ResultSet rs = meta.getTypeInfo()) {
                while (rs.next()) {
                    String name = rs.getString("TYPE_NAME");
                    if (List.of("int4", "int8", "text", "interval", "timestamptz").contains(name)) {
                        types.add(name + " " + rs.getInt("DATA_TYPE"));
                    }
                }
            }
            java.util.Collections.sort(types);
            check("getTypeInfo", types, List.of("int4 4", "int8 -5", "interval 1111", "text 12", "timestamptz 93"));
            try (Statement st = conn.createStatement();
                 ResultSet rs = st.executeQuery("SELECT INTERVAL '1 day 02:03:04' AS iv")) {
                check("INTERVAL row", rs.next(), true);
                Object interval = rs.getObject(1);
                check("getObject of an INTERVAL", interval.getClass().getName() + " " + interval,
                        "org.postgresql.util.PGInterval 0 years 0 mons 1 days 2 hours 3 mins 4.0 secs");
            }
            try (ResultSet rs = meta.getProcedures(null, "public", "%")) {
                check("getProcedures (none)", rs.next(), false);
            }
            try (ResultSet rs = meta.getImportedKeys(null, "public", "trades")) {
                check("getImportedKeys (no foreign keys)", rs.next(), false);
            }
            try (ResultSet rs = meta.getVersionColumns(null, "public", "trades")) {
                check("getVersionColumns has ctid", rs.next() ? rs.getString("COLUMN_NAME") : null, "ctid");
            }
            TreeSet<String> privileges = new TreeSet<>();
            try (ResultSet rs = meta.getTablePrivileges(null, "public", "trades")) {
                while (rs.next()) {
                    privileges.add(rs.getString("GRANTEE") + " " + rs.getString("PRIVILEGE"));
                }
            }
            check("getTablePrivileges", String.join(", ", privileges),
                    "postgres DELETE, postgres INSERT, postgres REFERENCES, postgres SELECT, "
                            + "postgres TRIGGER, postgres TRUNCATE, postgres UPDATE");
            int columnPrivileges = 0;
            try (ResultSet rs = meta.getColumnPrivileges(null, "public", "trades", "%")) {
                while (rs.next()) {
                    columnPrivileges++;
                }
            }
            check("getColumnPrivileges (7 per column)", columnPrivileges, 28);

            // executeBatch of INSERTs: the driver describes the statement first and expects
            // NoData for a statement without result columns.
            try (Statement st = conn.createStatement()) {
                st.execute("CREATE TABLE fills (id BIGINT, qty INT)");
            }
            try (PreparedStatement insert = conn.prepareStatement("INSERT INTO fills VALUES (?, ?)")) {
                for (int i = 1; i <= 3; i++) {
                    insert.setLong(1, i);
                    insert.setInt(2, i * 10);
                    insert.addBatch();
                }
                int[] counts = insert.executeBatch();
                check("executeBatch of INSERTs", java.util.Arrays.toString(counts), "[1, 1, 1]");
            }
            try (Statement st = conn.createStatement();
                 ResultSet rs = st.executeQuery("SELECT sum(qty) AS total FROM fills")) {
                check("executeBatch rows are there", rs.next() && rs.getLong("total") == 60L, true);
            }
        }
        // A fetch size outside autocommit: the driver binds a named portal and executes it a
        // few rows at a time (PortalSuspended between), never the whole result at once.
        try (Connection conn = DriverManager.getConnection(url, user, password)) {
            conn.setAutoCommit(false);
            try (Statement st = conn.createStatement()) {
                st.setFetchSize(3);
                try (ResultSet rs = st.executeQuery("SELECT value FROM generate_series(1, 10)")) {
                    long sum = 0;
                    int rows = 0;
                    while (rs.next()) {
                        sum += rs.getLong(1);
                        rows++;
                    }
                    check("fetch size 3: every row, a few at a time", rows + " " + sum, "10 55");
                }
            }
            conn.commit();
        }
        System.out.println("java clients: all checks passed");
    }
}
