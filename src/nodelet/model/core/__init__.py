"""The agent's core (pure): pod and runtime values, the decisions a pod worker executes
(`podactions`, `sandboxes`), status generation (`conditions`, `phases`, `generation`,
`transitions`), what containers are given (`specs`, `security`, `envvars`, `volumes`,
`downward`), admission, and the cluster-side values (`statuspatch`, `nodes`, `mirrorpods`).
Imports neither `parsing` nor `reports`."""
