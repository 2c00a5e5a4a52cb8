-- A LoadBalancer host belongs to one cluster, held by the database
-- (docs/database.md): `lb_host` is the host of an enabled LoadBalancer
-- cluster, NULL otherwise, and unique. Of clusters that already share one
-- (the check used to come before the write), the oldest keeps it; the others
-- keep working but hold no claim, and their next edit must name another host.
ALTER TABLE clusters ADD COLUMN lb_host TEXT;
UPDATE clusters SET lb_host = control_plane_host
WHERE public_access_enabled AND public_access_mode = 'loadbalancer' AND control_plane_host IS NOT NULL
  AND id = (SELECT MIN(c2.id) FROM clusters c2
            WHERE c2.control_plane_host = clusters.control_plane_host
              AND c2.public_access_enabled AND c2.public_access_mode = 'loadbalancer');
CREATE UNIQUE INDEX clusters_lb_host ON clusters (lb_host);
