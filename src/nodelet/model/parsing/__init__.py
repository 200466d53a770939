"""Reading manifests (pure): YAML/JSON documents with bounded input, validated as
kube-apiserver validates them, into `core` values. `manifests` is the public entry point;
`podfields` is the table of what nodelet does with every pod-spec field."""
