"""Testbeds of several hosts (issue 10): the testbed file, and (built on it) the hosts a run
drives, the testbed lock and host preparation."""
from nfvperf.testbed.spec import (HostSpec, LinkSpec, NicSpec, SshSpec, TestbedError, TestbedSpec,
                                  load_testbed, validate_testbed)

__all__ = ["HostSpec", "LinkSpec", "NicSpec", "SshSpec", "TestbedError", "TestbedSpec", "load_testbed",
           "validate_testbed"]
