-- 008: the Kubernetes labels of a source's pod.
--
-- The agent learns each pod's namespace, name and labels from the
-- Kubernetes API and stores the labels with the source as a JSON object of
-- strings ('{}' outside Kubernetes or while the pod is not yet known).
-- Labels are not part of the source id: a source's labels are those of its
-- pod when the source was first written (ON CONFLICT DO NOTHING).
-- Query with the jsonb operators, e.g. labels ->> 'app' or
-- labels @> '{"tier": "web"}' (served by the GIN index).

ALTER TABLE traceprof.sources ADD COLUMN labels jsonb NOT NULL DEFAULT '{}';
ALTER TABLE traceprof.sources ADD CONSTRAINT sources_labels_object
    CHECK (jsonb_typeof(labels) = 'object');
CREATE INDEX sources_labels_idx ON traceprof.sources USING gin (labels jsonb_path_ops);
