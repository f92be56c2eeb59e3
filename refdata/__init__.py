"""The upstream reference data the contract tests read: where each file comes from, its recorded digest, and
`make upstream`, which fetches them from their public sources (or a mirror) into `.upstream/`.

The files are other projects' (the GPU Operator chart, Kyverno's and the Prometheus Operator's CRDs, DCGM's
field list, ...): the repository records what they must be, never the files themselves.
"""
