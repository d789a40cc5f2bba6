"""TwoHostVmTestCase: a VmTestCase whose warren serves this machine's libvirt as host `local`
(the default) and second_host.py's fixture as host `second` (cls.far), declared isolated after
`warren isolate` ran there (second_host.lobby_args). A class adds its own serve flags with
FAR_SERVE_ARGS, or far_serve_args(far) when they need the fixture."""
import second_host
import warren_harness as h
from test_vm_e2e import VmTestCase


class TwoHostVmTestCase(VmTestCase):
    FAR_SERVE_ARGS = []

    @classmethod
    def far_serve_args(cls, far):
        return list(cls.FAR_SERVE_ARGS)

    @classmethod
    def setUpClass(cls):
        far = second_host.for_class(cls)
        cls.SERVE_ARGS = second_host.lobby_args(far, h.WARREN_BIN) + cls.far_serve_args(far)
        super().setUpClass()

    def far_domains(self):
        """The names of the second host's domains."""
        r = second_host.virsh(self.far.uri, "list", "--all", "--name", check=False)
        return [d for d in r.stdout.split() if d]
