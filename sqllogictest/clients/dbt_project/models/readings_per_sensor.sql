{{ config(materialized='materialized_view') }}
SELECT sensor, count(*) AS readings, sum(value) AS total FROM readings GROUP BY sensor
