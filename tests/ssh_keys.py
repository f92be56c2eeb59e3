"""A well-formed SSH public key for tests (an ed25519 key blob whose 32 bytes spell what it is; no private half)."""

TEST_PUBLIC_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGdwdS1wb29sIHRlc3Qga2V5LCBubyBwcml2YXRlIG9u ops@lab"
