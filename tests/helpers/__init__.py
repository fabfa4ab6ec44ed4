"""What the tests run against: fake upstreams (a raw one among them), the example agent, load, the harnesses' recipes."""
