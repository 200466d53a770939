"""The desired pods and the objects they name: the merged pod source (`sources`), the manifest
directory's watch (`manifestwatching`), the API's pods (`apisource`), ConfigMaps and Secrets
(`objectwatches`) and Services (`servicewatch`).

Owns: the desired set. May import: adapters; no pod work, no status.
"""
