{{ config(materialized='table') }}
SELECT sensor, value * 2 AS doubled FROM readings
