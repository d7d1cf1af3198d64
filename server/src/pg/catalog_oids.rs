//! The OIDs Postgres gives its catalog relations (fixed at initdb: `pg_class` is 1259). Tools
//! hard-code them (pg_dump finds a schema by the pair `(2615, oid)`), so Eddy's `pg_class`,
//! `pg_attribute` and `tableoid` give these rather than the numbers the crate assigns.

/// Each `pg_catalog` relation Eddy has, with its OID in Postgres 15.
const CATALOG_OIDS: &[(&str, i32)] = &[
    ("pg_aggregate", 2600),
    ("pg_am", 2601),
    ("pg_amop", 2602),
    ("pg_amproc", 2603),
    ("pg_attrdef", 2604),
    ("pg_attribute", 1249),
    ("pg_auth_members", 1261),
    ("pg_authid", 1260),
    ("pg_cast", 2605),
    ("pg_class", 1259),
    ("pg_collation", 3456),
    ("pg_constraint", 2606),
    ("pg_conversion", 2607),
    ("pg_database", 1262),
    ("pg_db_role_setting", 2964),
    ("pg_default_acl", 826),
    ("pg_depend", 2608),
    ("pg_description", 2609),
    ("pg_enum", 3501),
    ("pg_event_trigger", 3466),
    ("pg_extension", 3079),
    ("pg_foreign_data_wrapper", 2328),
    ("pg_foreign_server", 1417),
    ("pg_foreign_table", 3118),
    ("pg_index", 2610),
    ("pg_indexes", 12043),
    ("pg_inherits", 2611),
    ("pg_init_privs", 3394),
    ("pg_language", 2612),
    ("pg_largeobject", 2613),
    ("pg_largeobject_metadata", 2995),
    ("pg_matviews", 12038),
    ("pg_namespace", 2615),
    ("pg_opclass", 2616),
    ("pg_operator", 2617),
    ("pg_opfamily", 2753),
    ("pg_partitioned_table", 3350),
    ("pg_policy", 3256),
    ("pg_proc", 1255),
    ("pg_publication", 6104),
    ("pg_publication_namespace", 6237),
    ("pg_publication_rel", 6106),
    ("pg_range", 3541),
    ("pg_replication_origin", 6000),
    ("pg_replication_slots", 12257),
    ("pg_rewrite", 2618),
    ("pg_roles", 12000),
    ("pg_seclabel", 3596),
    ("pg_seclabels", 12099),
    ("pg_sequence", 2224),
    ("pg_settings", 12104),
    ("pg_shdepend", 1214),
    ("pg_shdescription", 2396),
    ("pg_shseclabel", 3592),
    ("pg_stat_activity", 12222),
    ("pg_stat_gssapi", 12253),
    ("pg_stat_user_tables", 12161),
    ("pg_statistic", 2619),
    ("pg_statistic_ext", 3381),
    ("pg_statistic_ext_data", 3429),
    ("pg_subscription", 6100),
    ("pg_subscription_rel", 6102),
    ("pg_tables", 12033),
    ("pg_tablespace", 1213),
    ("pg_transform", 3576),
    ("pg_trigger", 2620),
    ("pg_ts_config", 3602),
    ("pg_ts_dict", 3600),
    ("pg_ts_parser", 3601),
    ("pg_ts_template", 3764),
    ("pg_type", 1247),
    ("pg_user_mapping", 1418),
    ("pg_views", 12028),
];

/// Postgres' OID of the `pg_catalog` relation of this name.
pub(crate) fn catalog_oid(name: &str) -> Option<i32> {
    CATALOG_OIDS
        .binary_search_by(|(relation, _)| (*relation).cmp(name))
        .ok()
        .map(|at| CATALOG_OIDS[at].1)
}

#[cfg(test)]
mod tests {
    #[test]
    fn catalogs_have_postgres_oids() {
        assert_eq!(super::catalog_oid("pg_class"), Some(1259));
        assert_eq!(super::catalog_oid("pg_namespace"), Some(2615));
        assert_eq!(super::catalog_oid("t"), None);
        let names: Vec<&str> = super::CATALOG_OIDS.iter().map(|(n, _)| *n).collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        assert_eq!(names, sorted, "binary search needs the names sorted");
    }
}
