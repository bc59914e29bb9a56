"""libgreyhound_job's C API from Python through ctypes, as the Megatron plugin calls it (no Redis needed).

usage: /usr/bin/python3 job_ctypes_test.py build/lib/libgreyhound_job.so
Checks the structs' layout as ctypes sees them, the status codes, the argument checks, and that an absent
Redis is reported as unavailable rather than raised or fatal.
"""
import ctypes
import os
import socket
import sys
import unittest

LIB_PATH = None

# The declarations the Megatron plugin uses (python/greyhound_megatron/_capi.py): checked here against the
# library itself.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from greyhound_megatron._capi import (CAP_S2, ERR_INVALID, ERR_UNAVAILABLE, NO_PLAN, OK, PLAN_REJECTED,  # noqa: E402
                                      Layout, Plan)
from greyhound_megatron import _capi  # noqa: E402


def load():
    return _capi.load(LIB_PATH)


def closed_port():
    """A local TCP port nothing listens on (bound, then released)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def ints(values):
    return (ctypes.c_int32 * len(values))(*values), len(values)


class JobCApi(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.lib = load()

    def open(self, job=b"my-job", url=None):
        handle = ctypes.c_void_p()
        err = ctypes.create_string_buffer(256)
        if url is None:
            url = ("redis://127.0.0.1:%d/0" % closed_port()).encode()
        rc = self.lib.greyhound_job_open_v1(job, url, ctypes.byref(handle), err, len(err))
        return rc, handle, err.value.decode()

    def layout(self, mb, world=4):
        arr, n = ints(mb)
        self._keep = arr
        return Layout(tp=1, dp=len(mb), pp=world // len(mb), world=world, microbatches=arr, microbatches_len=n,
                      initial_microbatches=None, initial_microbatches_len=0, capabilities=CAP_S2, gpus_per_node=2)

    def test_version_and_status_names(self):
        self.assertEqual(self.lib.greyhound_job_api_version(), 1)
        self.assertEqual(self.lib.greyhound_job_status_name(OK), b"ok")
        self.assertEqual(self.lib.greyhound_job_status_name(PLAN_REJECTED), b"plan_rejected")
        self.assertEqual(self.lib.greyhound_job_status_name(ERR_UNAVAILABLE), b"unavailable")
        self.assertEqual(self.lib.greyhound_job_status_name(99), b"unknown")

    def test_a_bad_url_is_invalid_with_a_reason(self):
        rc, handle, err = self.open(url=b"http://nowhere")
        self.assertEqual(rc, ERR_INVALID)
        self.assertIsNone(handle.value)
        self.assertTrue(err.startswith("redis: "), err)

    def test_a_job_name_redis_keys_cannot_carry_is_refused_not_rewritten(self):
        rc, handle, err = self.open()
        self.assertEqual(rc, OK, err)
        self.assertEqual(err, "")
        self.assertEqual(self.lib.greyhound_job_name_v1(handle), b"my-job")
        self.lib.greyhound_job_close_v1(handle)
        for name, why in [(b"my job", "0x20 at offset 2"), (b"a{b}:c", "'{' at offset 1"),
                          (b"x" * 64, "longer than 63")]:
            rc, handle, err = self.open(job=name)
            self.assertEqual(rc, ERR_INVALID, name)
            self.assertIsNone(handle.value)
            self.assertIn(why, err)

    def test_arguments_are_checked_before_redis(self):
        rc, handle, err = self.open()
        self.assertEqual(rc, OK, err)
        try:
            plan = Plan()
            self.assertEqual(self.lib.greyhound_job_poll_plan_v1(handle, ctypes.byref(plan)), ERR_INVALID)
            self.assertIn(b"no layout", self.lib.greyhound_job_last_error_v1(handle))
            bad = self.layout([4, 4])
            bad.world = 6  # not tp * dp * pp
            self.assertEqual(self.lib.greyhound_job_publish_layout_v1(handle, ctypes.byref(bad)), ERR_INVALID)
            self.assertEqual(self.lib.greyhound_job_last_error_v1(handle), b"layout: world: must be tp * dp * pp")
            self.assertEqual(self.lib.greyhound_job_ack_v1(handle, 0, 1, 5, 9, b"x"), ERR_INVALID)
            self.assertEqual(self.lib.greyhound_job_last_plan_v1(handle, ctypes.byref(plan)), NO_PLAN)
            self.assertEqual(self.lib.greyhound_job_poll_plan_v1(None, ctypes.byref(plan)), ERR_INVALID)
            self.assertEqual(self.lib.greyhound_job_last_error_v1(None), b"client: NULL")
        finally:
            self.lib.greyhound_job_close_v1(handle)

    def test_cost_estimates_are_checked(self):
        rc, handle, err = self.open()
        self.assertEqual(rc, OK, err)
        try:
            self.assertEqual(self.lib.greyhound_job_set_cost_estimate_v1(handle, _capi.S3, 0.25), OK)
            self.assertEqual(self.lib.greyhound_job_set_cost_estimate_v1(handle, _capi.S4, 600.0), OK)
            self.assertEqual(self.lib.greyhound_job_set_cost_estimate_v1(handle, _capi.S2, 1.0), ERR_INVALID)
            self.assertEqual(self.lib.greyhound_job_set_cost_estimate_v1(handle, _capi.S3, -1.0), ERR_INVALID)
            self.assertEqual(self.lib.greyhound_job_set_cost_estimate_v1(handle, _capi.S3, float("inf")), ERR_INVALID)
            self.assertIn(b"seconds", self.lib.greyhound_job_last_error_v1(handle))
        finally:
            self.lib.greyhound_job_close_v1(handle)

    def test_the_microbatch_multiple_is_checked(self):
        rc, handle, err = self.open()
        self.assertEqual(rc, OK, err)
        try:
            self.assertEqual(self.lib.greyhound_job_set_microbatch_multiple_v1(handle, 2), OK)
            self.assertEqual(self.lib.greyhound_job_set_microbatch_multiple_v1(handle, -1), ERR_INVALID)
            self.assertIn(b"multiple", self.lib.greyhound_job_last_error_v1(handle))
            odd = self.layout([5, 3])  # not multiples of 2: refused before Redis is reached
            self.assertEqual(self.lib.greyhound_job_publish_layout_v1(handle, ctypes.byref(odd)), ERR_INVALID)
            self.assertIn(b"not a multiple of microbatch_multiple 2", self.lib.greyhound_job_last_error_v1(handle))
        finally:
            self.lib.greyhound_job_close_v1(handle)

    def test_an_absent_redis_is_unavailable(self):
        rc, handle, err = self.open()
        self.assertEqual(rc, OK, err)
        try:
            good = self.layout([4, 4])
            self.assertEqual(self.lib.greyhound_job_publish_layout_v1(handle, ctypes.byref(good)), ERR_UNAVAILABLE)
            self.assertNotEqual(self.lib.greyhound_job_last_error_v1(handle), b"")
            plan = Plan()
            # The layout was kept as the reference: the poll gets as far as Redis.
            self.assertEqual(self.lib.greyhound_job_poll_plan_v1(handle, ctypes.byref(plan)), ERR_UNAVAILABLE)
            nodes, n = ints([1])
            self.assertEqual(self.lib.greyhound_job_request_restart_v1(handle, 0, 0, b"slow", nodes, n, None, 0),
                             ERR_UNAVAILABLE)
        finally:
            self.lib.greyhound_job_close_v1(handle)


if __name__ == "__main__":
    LIB_PATH = sys.argv.pop(1)
    unittest.main(verbosity=2)
