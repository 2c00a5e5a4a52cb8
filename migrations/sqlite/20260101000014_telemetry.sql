-- vCluster's usage telemetry (chart values `telemetry.enabled`), chosen when
-- a cluster is created, fixed after: new clusters 'off'. Existing clusters
-- keep the chart's default, so their values — and their running control
-- planes — stay as they are.
ALTER TABLE clusters ADD COLUMN telemetry TEXT NOT NULL DEFAULT 'chart_default';
