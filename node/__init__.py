"""One way to touch a node: the Node's vocabulary, one Kubernetes client, one Proxmox client, and a turn's
transitions as small functions over them. Standard library and knowledge/ only: it is packed into every payload
that acts on a node (the node-steps script pulumi-command and `gpu-pool repair` run, the in-cluster watcher) and
imported where the project is installed. The wave, `gpu-pool repair` and the watcher drive these transitions and
never write a turn-state value, the operator's skip label or its initial-state mark themselves (a test holds it).

- node/vocabulary.py: the labels, annotations, the `TurnState` enum, holders and the repair record.
- node/kube.py: the Kubernetes client (`Kube`) over a kubectl or a REST transport, with client-go's retries.
- node/proxmox.py: the Proxmox client.
- node/waiting.py: a wait that treats an API error as "not yet" until its deadline.
- node/drain.py: which pods a drain evicts, by `kubectl drain`'s rules, and the drain itself.
- node/turn.py: the turn's transitions (take the hold, hold the operator, cordon, drain, gate, record, stop, release).
- node/power.py: the power cycle through Proxmox, with the host's checks read right before the stop.
"""
