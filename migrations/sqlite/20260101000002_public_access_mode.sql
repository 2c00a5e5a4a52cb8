-- Public access gains a mode (seed 3.1). Every existing cluster was NodePort.
ALTER TABLE clusters ADD COLUMN public_access_mode TEXT NOT NULL DEFAULT 'nodeport';
UPDATE clusters SET public_access_mode = 'nodeport'
    WHERE public_access_mode IS NULL OR public_access_mode = '';
