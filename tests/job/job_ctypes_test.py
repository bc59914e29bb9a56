"""libgreyhound_job's C API from Python through ctypes, as the Megatron plugin calls it (no Redis needed).

usage: /usr/bin/python3 job_ctypes_test.py build/lib/libgreyhound_job.so
Checks the structs' layout as ctypes sees them, the status codes, the argument checks, and that an absent
Redis is reported as unavailable rather than raised or fatal.
"""
import ctypes
import socket
import sys
import unittest

LIB_PATH = None

OK, NO_PLAN, PLAN_REJECTED = 0, 1, 2
ERR_INVALID, ERR_UNAVAILABLE = -1, -2
CAP_S2 = 1


class Layout(ctypes.Structure):
    _fields_ = [("tp", ctypes.c_int32), ("dp", ctypes.c_int32), ("pp", ctypes.c_int32), ("world", ctypes.c_int32),
                ("microbatches", ctypes.POINTER(ctypes.c_int32)), ("microbatches_len", ctypes.c_size_t),
                ("initial_microbatches", ctypes.POINTER(ctypes.c_int32)),
                ("initial_microbatches_len", ctypes.c_size_t),
                ("capabilities", ctypes.c_uint32), ("gpus_per_node", ctypes.c_int32)]


class Placement(ctypes.Structure):
    _fields_ = [("rank", ctypes.c_int32), ("tp", ctypes.c_int32), ("dp", ctypes.c_int32), ("pp", ctypes.c_int32)]


class Plan(ctypes.Structure):
    _fields_ = [("epoch", ctypes.c_int64), ("strategy", ctypes.c_int32), ("action", ctypes.c_int32),
                ("incident", ctypes.c_int64), ("predicted_iteration_s", ctypes.c_double),
                ("microbatches", ctypes.POINTER(ctypes.c_int32)), ("microbatches_len", ctypes.c_size_t),
                ("placement", ctypes.POINTER(Placement)), ("placement_len", ctypes.c_size_t),
                ("exclude_ranks", ctypes.POINTER(ctypes.c_int32)), ("exclude_ranks_len", ctypes.c_size_t),
                ("exclude_nodes", ctypes.POINTER(ctypes.c_int32)), ("exclude_nodes_len", ctypes.c_size_t),
                ("reason", ctypes.c_char_p), ("verdict", ctypes.c_char_p)]


def load():
    lib = ctypes.CDLL(LIB_PATH)
    lib.greyhound_job_api_version.restype = ctypes.c_int
    lib.greyhound_job_status_name.restype = ctypes.c_char_p
    lib.greyhound_job_status_name.argtypes = [ctypes.c_int]
    lib.greyhound_job_open_v1.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p),
                                          ctypes.c_char_p, ctypes.c_size_t]
    lib.greyhound_job_close_v1.argtypes = [ctypes.c_void_p]
    lib.greyhound_job_last_error_v1.argtypes = [ctypes.c_void_p]
    lib.greyhound_job_last_error_v1.restype = ctypes.c_char_p
    lib.greyhound_job_name_v1.argtypes = [ctypes.c_void_p]
    lib.greyhound_job_name_v1.restype = ctypes.c_char_p
    lib.greyhound_job_publish_layout_v1.argtypes = [ctypes.c_void_p, ctypes.POINTER(Layout)]
    lib.greyhound_job_poll_plan_v1.argtypes = [ctypes.c_void_p, ctypes.POINTER(Plan)]
    lib.greyhound_job_last_plan_v1.argtypes = [ctypes.c_void_p, ctypes.POINTER(Plan)]
    lib.greyhound_job_ack_v1.argtypes = [ctypes.c_void_p, ctypes.c_int32, ctypes.c_int64, ctypes.c_int64,
                                         ctypes.c_int32, ctypes.c_char_p]
    lib.greyhound_job_request_restart_v1.argtypes = [
        ctypes.c_void_p, ctypes.c_int32, ctypes.c_int64, ctypes.c_char_p, ctypes.POINTER(ctypes.c_int32),
        ctypes.c_size_t, ctypes.POINTER(ctypes.c_int32), ctypes.c_size_t]
    return lib


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

    def open(self, job=b"my job", url=None):
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

    def test_the_job_name_is_sanitised(self):
        rc, handle, err = self.open()
        self.assertEqual(rc, OK, err)
        self.assertEqual(err, "")
        self.assertEqual(self.lib.greyhound_job_name_v1(handle), b"my_job")
        self.lib.greyhound_job_close_v1(handle)

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
