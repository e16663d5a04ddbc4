"""The hints of lab 09 (streams), each fired on the failure its bug really
produces (solutions/NN-slug/mutants/ describes the bugs), and kept away from the failures of other tasks.

A failure is built the way a test binary reports it: the message a test's EXPECT_* prints (cudalab/
compare.hpp for arrays, written here by _compare), as a GoogleTest JSON report that grader/execute/gtest.py
reads (which also picks the category: a message naming any cudaError... is a cuda_error); compute-sanitizer
findings go through grader/execute/sanitizer.py's parser, missing techniques through penalties. Then the
score stage (scoring.score) gives each test its task and its hint, as in a real grade."""

from __future__ import annotations

import random

from grader.model.results import Category
from grader.tests.gtest_failures import compare, cuda_error, equal, grade, one, stopped, value_of

FILL_BINS = 0xA5A5A5A5  # the bins before every histogram call


# --- lab 09: streams -------------------------------------------------------------------------------------

STREAMS_AT = "/home/s/labs/09-streams/test_streams.cu"


def _work(n: int, seed: int) -> list[float]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        x = y = rng.uniform(1.0, 2.0)
        for _ in range(7):
            y = y * 0.5 + x
        out.append(y)
    return out


def _output(expected: list[float], actual: list[float], seed: int, streamed: str = "", line: int = 514) -> str:
    return value_of(f"{STREAMS_AT}:{line}", "p.output_matches()", compare(expected, actual, seed), streamed)


def _idle(what: str, stream: int, line: int) -> str:
    """StreamsIdle: the function returned while a stream still had work."""
    return value_of(f"{STREAMS_AT}:{line}", f'StreamsIdle(streams.get(), "{what}")',
                     f"{what} returned while stream {stream} still had work (cudaStreamQuery: cudaErrorNotReady): wait "
                     "for every stream you used before returning, so h_out holds the result")


def _legacy(what: str, seconds: float) -> list[str]:
    """expect_ignores_legacy_stream: the function waited for the kernel holding stream 0."""
    return [
        equal(f"{STREAMS_AT}:330", "still_closed", "0", "cudaErrorNotReady", "600",
               f"{what} returned only after {seconds} s, once a kernel holding the legacy default stream (stream 0) had "
               "timed out: something in it waits for stream 0. Use your own streams created with cudaStreamNonBlocking, "
               "cudaMemcpyAsync on them (not cudaMemcpy), launches with a stream, and cudaStreamSynchronize (not "
               "cudaDeviceSynchronize)."),
        equal(f"{STREAMS_AT}:335", "gate.outcome()", "2", "1", "1",
               "the gate kernel on stream 0 timed out instead of being opened"),
    ]


NAN = float("nan")
NEG_NAN = -float("nan")  # cudalab::poison's 0xFF bytes: printed -nan


def test_09_serial_returns_before_the_copy_back_with_pinned_memory() -> None:
    """serial-async-copy-back: fine into pageable h_out (the copy is staged), early into pinned h_out."""
    expected = _work(1000, 16010)
    graded = grade("09-streams", [
        ("StreamsSerialCorrectness.MatchesCpu/1000", []),
        ("StreamsSerialCorrectness.PinnedReturnsWhenDone/1000", [
            value_of(f"{STREAMS_AT}:449", 'StreamsIdle({cudaStreamLegacy}, "run_serial")',
                      "run_serial returned while stream 0 still had work (cudaStreamQuery: cudaErrorNotReady): wait for "
                      "every stream you used before returning, so h_out holds the result"),
            _output(expected, [NAN] * 1000, 16010, "read right after run_serial returned, with pinned h_out", 450)]),
    ])
    t = graded["StreamsSerialCorrectness.PinnedReturnsWhenDone/1000"]
    assert t.category is Category.CUDA_ERROR and t.task == "serial"
    assert "A cudaMemcpyAsync into pageable memory is staged" in t.hint and "compute-sanitizer" not in t.hint


def test_09_serial_copies_n_bytes() -> None:
    """serial-copies-n-bytes: a quarter of the floats go in and come back."""
    graded = {}
    for n in (1000, (1 << 20) + 3):
        expected = _work(n, 9009 + n)
        actual = expected[:n // 4] + [NAN] * (n - n // 4)
        graded.update(grade("09-streams", [(f"StreamsSerialCorrectness.MatchesCpu/{n}",
                                             [_output(expected, actual, 9009 + n, line=438)])]))
    for t in graded.values():
        assert t.category is Category.WRONG_ANSWER and "each direction must move n * sizeof(float)" in t.hint


def test_09_streams_reserved_not_created() -> None:
    """streams-reserve-not-resize (the skeleton too): an empty vector."""
    t = one("09-streams", "StreamsCreateCorrectness.NonBlocking/4", [
        equal(f"{STREAMS_AT}:473", "streams.size()", "0", "static_cast<std::size_t>(count)", "4", "create_streams(4)")])
    assert t.task == "streams" and "reserve(count) only sets aside capacity" in t.hint


def test_09_pipeline_that_uses_stream_0() -> None:
    """pipe-blocking-h2d-copy, pipe-device-synchronize, pipe-kernel-on-default-stream."""
    t = one("09-streams", "StreamsLegacyCorrectness.PipelineIgnoresLegacyStream", _legacy("run_pipelined", 3.00184))
    assert t.category is Category.CUDA_ERROR and t.task == "pipelined"
    assert "look for default arguments" in t.hint and "launch_work(..., nullptr)" in t.hint


def test_09_pipeline_that_waits_for_one_stream_only() -> None:
    """pipe-waits-first-stream-only: chunks on streams 1 and 2 still in flight."""
    expected = _work(1000, 9009 + 2007)
    actual = expected[:142] + [NAN] * 143 + expected[285:]
    t = one("09-streams", "StreamsPipelineCorrectness.MatchesCpu/n1000_s3_c7", [
        _idle("run_pipelined", 1, 513),
        _output(expected, actual, 9009 + 2007, "3 streams, 7 chunks (NaN: never copied back, or computed on input that "
                "had not arrived)")])
    assert t.category is Category.CUDA_ERROR and "call cudaStreamSynchronize on every stream of the vector" in t.hint


def test_09_pipeline_with_equal_chunk_sizes() -> None:
    """pipe-equal-chunk-sizes: 7 chunks of 142 leave the last 6 of 1000 elements out."""
    expected = _work(1000, 9009 + 2007)
    t = one("09-streams", "StreamsPipelineCorrectness.MatchesCpu/n1000_s3_c7", [
        _output(expected, expected[:994] + [NAN] * 6, 9009 + 2007,
                "3 streams, 7 chunks (NaN: never copied back, or computed on input that had not arrived)")])
    assert "chunk_begin(n, num_chunks, c + 1)" in t.hint and "ceil-div" not in t.hint


def test_09_pipeline_kernel_input_not_offset() -> None:
    """pipe-kernel-input-not-offset: every chunk computes on chunk 0's input."""
    expected = _work(1000, 9009 + 2007)
    begins = [1000 * c // 7 for c in range(8)]
    actual = [expected[i - max(b for b in begins[:7] if b <= i)] for i in range(1000)]
    t = one("09-streams", "StreamsPipelineCorrectness.MatchesCpu/n1000_s3_c7", [
        _output(expected, actual, 9009 + 2007,
                "3 streams, 7 chunks (NaN: never copied back, or computed on input that had not arrived)")])
    assert "d_in + begin and d_out + begin for the kernel" in t.hint


def test_09_pipeline_stream_per_chunk_index() -> None:
    """pipe-stream-per-chunk-index: streams[c] read past the vector for 8 chunks on 2 streams."""
    t = one("09-streams", "StreamsPipelineCorrectness.MatchesCpu/n5_s2_c8", [cuda_error(
        "cudaErrorInvalidResourceHandle", "invalid resource handle",
        "cudaMemcpyAsync(d_in + begin, h_in + begin, bytes, cudaMemcpyHostToDevice, stream)",
        "/home/s/labs/09-streams/streams.cu:64")])
    assert "chunk c goes to streams[c % streams.size()]" in t.hint


def test_09_three_stages_without_their_waits() -> None:
    """events-kernel-does-not-wait, events-copied-recorded-on-compute: kernels run on the poison (-nan)."""
    n = (1 << 22) + 5
    expected = _work(64, 9050)
    t = one("09-streams", "StreamsEventsCorrectness.KernelWaitsForItsCopyIn", [value_of(
        f"{STREAMS_AT}:702", "p.output_matches()",
        compare(expected + [0.0] * (n - 64), [NEG_NAN] * 64 + [0.0] * (n - 64), 9050),
        "with the H2D stream held back for 100 ms, the kernels did not wait for their input: make s_compute wait "
        "(cudaStreamWaitEvent) for an event recorded on s_h2d after the chunk's copy")])
    assert t.category is Category.WRONG_ANSWER and t.task == "events"
    assert "The wait uses the most recent record at the time of the call" in t.hint


def test_09_three_stages_that_wait_for_the_wrong_stream() -> None:
    """events-waits-for-compute-stream."""
    what = "run_three_stage (with one stage held back for 100 ms)"
    t = one("09-streams", "StreamsEventsCorrectness.ReturnsWhenCopiesBackAreDone", [_idle(what, 2, 701)])
    assert t.category is Category.CUDA_ERROR and "wait for s_d2h, the stream of the last stage" in t.hint


def test_09_three_stages_on_stream_0_and_leaking_events() -> None:
    graded = grade("09-streams", [
        ("StreamsEventsCorrectness.ThreeStageIgnoresLegacyStream", _legacy("run_three_stage", 3.00211)),
        ("StreamsResourcesCorrectness.ThreeStage", [value_of(
            f"{STREAMS_AT}:739", 'ReleasesResources("run_three_stage with 1024 chunks", kCalls, [&] { ... })',
            "16 more calls of run_three_stage with 1024 chunks kept 32768 event(s) (cudaEventDestroy for every event): "
            "something is created and never released")]),
    ])
    legacy = graded["StreamsEventsCorrectness.ThreeStageIgnoresLegacyStream"]
    assert legacy.task == "events" and "the final wait is on s_d2h" in legacy.hint
    leak = graded["StreamsResourcesCorrectness.ThreeStage"]
    assert leak.task == "events" and "Two events re-recorded for every chunk also work" in leak.hint


def _callback_checks(calls: list[int], ready: list[int], wrong_user: int = 0) -> list[str]:
    out = []
    if wrong_user:
        out.append(equal(f"{STREAMS_AT}:813", "g_wrong_user.load()", str(wrong_user), "0", "0",
                          "on_done was called with a user pointer other than the one given to "
                          "run_pipelined_with_callback: pass each chunk's `user` on unchanged"))
    ones = [1] * len(calls)
    if calls != ones:
        out.append(value_of(f"{STREAMS_AT}:815", "AllEqual(std::vector<int>(chunks, 1), log.calls, seed)",
                             compare(ones, calls, 14016),
                             "calls of on_done per chunk (index = chunk): each chunk's callback must run exactly once, "
                             "before run_pipelined_with_callback returns"))
    if ready != ones:
        out.append(value_of(f"{STREAMS_AT}:818", "AllEqual(std::vector<int>(chunks, 1), log.ready, seed)",
                             compare(ones, ready, 14016),
                             "1 = the chunk's results were in h_out when its callback ran; 0 = the callback ran before "
                             "its D2H copy was done: enqueue it after the copy, in the same stream"))
    return out


def test_09_callback_gets_its_args_as_user() -> None:
    """cb-passes-args-as-user: every call is refused by the test's on_done, so none is counted."""
    t = one("09-streams", "StreamsCallbackCorrectness.OncePerChunkAfterItsCopy/n1000_s3_c7",
              _callback_checks([0] * 7, [0] * 7, wrong_user=7))
    assert "receives a pointer to its chunk's ChunkDoneArgs" in t.hint


def test_09_callbacks_share_one_args_slot() -> None:
    """cb-one-args-slot: the slot holds a later chunk by the time most callbacks run."""
    t = one("09-streams", "StreamsCallbackCorrectness.OncePerChunkAfterItsCopy/n65531_s4_c16",
              _callback_checks([1, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0, 6], [1] * 16))
    assert "A single shared slot is overwritten" in t.hint


def test_09_callback_on_stream_0() -> None:
    """cb-on-legacy-stream."""
    t = one("09-streams", "StreamsLegacyCorrectness.CallbackPipelineIgnoresLegacyStream",
              _legacy("run_pipelined_with_callback", 3.0017) + _callback_checks([1] * 8, [1, 0, 1, 1, 0, 1, 1, 0]))
    assert t.task == "callback" and "cudaLaunchHostFunc takes the stream as its first argument" in t.hint
    assert "launch_work(..., nullptr)" not in t.hint


def test_09_callback_returns_early_and_callback_that_hangs() -> None:
    name = "StreamsCallbackCorrectness.OncePerChunkAfterItsCopy/n4194305_s8_c33"
    graded = grade("09-streams", [
        ("StreamsCallbackCorrectness.OncePerChunkAfterItsCopy/n1000_s3_c7",
         [_idle("run_pipelined_with_callback", 2, 833)])],
        extra=[stopped(name, Category.TIMEOUT, "the test did not finish within 300 s and was stopped")])
    early = graded["StreamsCallbackCorrectness.OncePerChunkAfterItsCopy/n1000_s3_c7"]
    assert early.category is Category.CUDA_ERROR and "that wait is what keeps it alive long enough" in early.hint
    assert "must not call the CUDA API" in graded[name].hint


def test_09_trace_never_recorded() -> None:
    """Task 6 not done yet: the events are created by the test and never recorded."""
    t = one("09-streams", "StreamsTraceCorrectness.EventsBracketEachStage", [
        f"{STREAMS_AT}:967\nValue of: t.empty()\n  Actual: true\nExpected: false\ntrace[0] gives no time "
        "(cudaErrorInvalidResourceHandle): was it recorded, after trace[0]?"])
    assert t.category is Category.CUDA_ERROR and t.task == "trace"
    assert "A trace event was never recorded" in t.hint


def test_09_trace_that_does_not_bracket_the_copies() -> None:
    """trace-recorded-on-default-stream, trace-start-after-copy."""
    t = one("09-streams", "StreamsTraceCorrectness.EventsBracketEachStage", [
        f"{STREAMS_AT}:973\nExpected: (m[1] - m[0]) >= (0.5 * h2d_ms), actual: 0.00307 vs 1.28934\nchunk 0: trace[4c] "
        "and trace[4c + 1] do not bracket its H2D copy (alone, that copy takes 2.57868 ms)"])
    assert "cudaEventRecord(e) without a stream argument records on stream 0" in t.hint


def test_09_trace_in_the_wrong_layout() -> None:
    """trace-stage-major-layout."""
    t = one("09-streams", "StreamsTraceCorrectness.EventsBracketEachStage", [
        f"{STREAMS_AT}:970\nValue of: m[0] <= m[1] && m[1] <= m[2] && m[2] <= m[3]\n  Actual: false\nExpected: true\n"
        "chunk 0: trace times 0, 5.21, 2.6, 7.9 ms are out of order (before H2D, after H2D, after kernel, after D2H)"])
    assert "chunk c's events are trace[4c] to trace[4c + 3]" in t.hint


def test_09_hints_stay_with_their_task() -> None:
    # The three-stage pipeline's NaN is not the one-stream pipeline's, nor the other way round.
    expected = _work(1000, 9009 + 3007)
    pipe = one("09-streams", "StreamsPipelineCorrectness.MatchesCpu/n1000_s3_c7",
                 [_output(expected, [NEG_NAN] * 1000, 9009 + 3007, "3 streams, 7 chunks")])
    assert "cudaStreamWaitEvent" not in pipe.hint and "Nothing came back" in pipe.hint
    three = one("09-streams", "StreamsThreeStageCorrectness.MatchesCpu/n1000_c7",
                  [_output(expected, expected[:994] + [NAN] * 6, 9009 + 3007, "7 chunks", line=672)])
    assert "chunk_begin" not in three.hint
    # A pipeline that hangs is not told about callbacks.
    name = "StreamsPipelineCorrectness.MatchesCpu/n1000_s3_c7"
    hung = grade("09-streams", [], extra=[stopped(name, Category.TIMEOUT,
                                                     "the test did not finish within 300 s and was stopped")])[name]
    assert hung.task == "pipelined" and "cudaLaunchHostFunc" not in hung.hint
    # The callback pipeline on stream 0 is not sent to launch_work's stream argument.
    legacy = one("09-streams", "StreamsLegacyCorrectness.PipelineIgnoresLegacyStream", _legacy("run_pipelined", 3.0))
    assert "cudaLaunchHostFunc" not in legacy.hint


def test_09_three_stages_whose_last_stage_runs_ahead() -> None:
    """events-kernel-does-not-wait and its kin on the test that holds s_h2d back: the function waited for
    s_d2h, which did not wait for the others, so it returned with stream 0 (s_h2d) busy."""
    what = "run_three_stage (with one stage held back for 100 ms)"
    t = one("09-streams", "StreamsEventsCorrectness.KernelWaitsForItsCopyIn", [_idle(what, 0, 701)])
    assert t.category is Category.CUDA_ERROR and "s_d2h, ran ahead of them" in t.hint
    assert "Waiting for s_compute does not cover" not in t.hint  # that is stream 2's case


def test_09_callbacks_before_their_copies() -> None:
    """cb-enqueued-before-d2h: each callback ran, once, before its chunk was back."""
    t = one("09-streams", "StreamsLegacyCorrectness.CallbackPipelineIgnoresLegacyStream",
            _callback_checks([1] * 8, [0] * 8))
    assert t.task == "callback" and "A callback ran before its chunk was back in h_out" in t.hint
    assert "is the kernel launched" not in t.hint


def test_09_blocking_streams_and_leaks() -> None:
    """streams-blocking-flag, streams-never-destroyed, events-never-destroyed."""
    flag = one("09-streams", "StreamsCreateCorrectness.NonBlocking/1", [equal(
        f"{STREAMS_AT}:476", "flags & 0x01", "0", "static_cast<unsigned int>(0x01)", "1",
        "a stream made by cudaStreamCreate synchronizes with the legacy default stream: create it with "
        "cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)")])
    assert "one cudaMemcpy or launch without a stream anywhere in the program serializes" in flag.hint
    graded = grade("09-streams", [], missing=["cudaStreamDestroy", "cudaEventDestroy"])
    assert "destroy_streams must call cudaStreamDestroy on each one" in graded["Techniques.streams"].hint
    assert "release each one with cudaEventDestroy" in graded["Techniques.events"].hint


def test_09_pipeline_kernel_on_stream_0_leaves_everything_unwritten() -> None:
    """pipe-kernel-on-default-stream: with stream 0 held, nothing comes back (all NaN)."""
    expected = _work(64, 9040)
    t = one("09-streams", "StreamsLegacyCorrectness.PipelineIgnoresLegacyStream",
            [_output(expected, [NAN] * 64, 9040)])
    assert t.task == "pipelined" and "part of your pipeline runs there" in t.hint


# --- lab 09: the failures the H200 gate's reports showed first ----------------------------------------


def test_09_serial_round_trip_of_one_element() -> None:
    """serial-copies-n-bytes at n = 1: one byte of the float makes the trip; h_out keeps its NaN."""
    t = one("09-streams", "StreamsSerialCorrectness.MatchesCpu/1",
            [_output(_work(1, 9010), [NAN], 9010, line=438)])
    assert t.task == "serial" and "cudaMemcpy counts bytes, n * sizeof(float) each way" in t.hint


def test_09_streams_reserved_and_never_created_as_the_technique_check_sees_it() -> None:
    """streams-reserve-not-resize: the loop over the empty vector is compiled away with its create call."""
    graded = grade("09-streams", [], missing=["cudaStreamCreateWithFlags"])
    hinted = [t for t in graded.values() if t.category is Category.TECHNIQUE_MISSING]
    assert hinted and all("reserve(count) left empty never runs" in t.hint for t in hinted)


def test_09_pipeline_with_more_chunks_than_elements() -> None:
    """pipe-equal-chunk-sizes at n = 5 in 8 chunks: n / num_chunks is 0 and nothing comes back."""
    expected = _work(5, 9027)
    t = one("09-streams", "StreamsPipelineCorrectness.MatchesCpu/n5_s2_c8",
            [_output(expected, [NAN] * 5, 9027, "2 streams, 8 chunks")])
    assert t.task == "pipelined" and "more chunks than elements, where n / num_chunks is 0" in t.hint


def test_09_pipeline_chunk_computed_before_its_input_arrived() -> None:
    """pipe-kernel-on-default-stream on the plain test: one chunk (571..713 of 1,000 in 7) NaN."""
    expected = _work(1000, 11016)
    actual = [NAN if 571 <= i <= 713 else v for i, v in enumerate(expected)]
    t = one("09-streams", "StreamsPipelineCorrectness.MatchesCpu/n1000_s3_c7",
            [_output(expected, actual, 11016, "3 streams, 7 chunks")])
    assert "Some chunks came back NaN" in t.hint and "launch_work(..., s)" in t.hint


def test_09_three_stages_whose_later_stage_ran_ahead() -> None:
    """events-kernel-does-not-wait, events-d2h-does-not-wait on the plain test: chunks come back NaN."""
    expected = _work(1000, 3154)
    actual = [NAN if i >= 429 else v for i, v in enumerate(expected)]
    t = one("09-streams", "StreamsThreeStageCorrectness.MatchesCpu/n1000_c7",
            [_output(expected, actual, 3154, "7 chunks", line=673)])
    assert t.task == "events" and "make the consuming stream wait for it (cudaStreamWaitEvent)" in t.hint


def test_09_callback_on_stream_0_crashes_the_host() -> None:
    """cb-on-legacy-stream: the callbacks ran after the function returned, on args that were gone."""
    name = "StreamsCallbackCorrectness.OncePerChunkAfterItsCopy/n1_s1_c1"
    t = grade("09-streams", [], extra=[stopped(name, Category.CRASH, "the test process was killed by SIGSEGV")])[name]
    assert t.task == "callback" and "not 0, the legacy stream" in t.hint


def test_09_trace_out_of_order_comes_before_the_bracket_check() -> None:
    """trace-stage-major-layout on the H200: the test reports both copies not bracketed and times out of
    order; the layout is the cause."""
    t = one("09-streams", "StreamsTraceCorrectness.EventsBracketEachStage", [
        f"{STREAMS_AT}:974\nExpected: (m[1] - m[0]) >= (0.5 * h2d_ms), actual: 0.052416 vs 0.155856\nchunk 0: trace[4c] "
        "and trace[4c + 1] do not bracket its H2D copy (alone, that copy takes 0.311712 ms)",
        f"{STREAMS_AT}:970\nValue of: m[0] <= m[1] && m[1] <= m[2] && m[2] <= m[3]\n  Actual: false\nExpected: true\n"
        "chunk 1: trace times 0.32, 1.36, 1.02, 0.65 ms are out of order (before H2D, after H2D, after kernel, after D2H)"])
    assert "chunk c's events are trace[4c] to trace[4c + 3]" in t.hint


def test_09_pipeline_stream_index_past_the_vector_crashes_the_host() -> None:
    """pipe-stream-per-chunk-index on the H200: the first failure is a host crash, not an invalid handle."""
    name = "StreamsResourcesCorrectness.Pipeline"
    t = grade("09-streams", [], extra=[stopped(name, Category.CRASH, "the test process was killed by SIGSEGV")])[name]
    assert t.task == "pipelined" and "streams[c % streams.size()]" in t.hint
