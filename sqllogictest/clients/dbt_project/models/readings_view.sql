{{ config(materialized='view') }}
SELECT sensor, value FROM readings WHERE value > 0
