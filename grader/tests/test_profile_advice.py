"""The profile's advice (grader/profile/advice.py) and what it reads besides ncu's numbers: each student
kernel's global access widths from its PTX, the library kernel a baseline is profiled as. On ncu pages and
names recorded on an H200; no GPU needed."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from grader.host.toolkit import find_nvcc
from grader.inspect.elf import demangle
from grader.profile import advice
from grader.profile.stage import LIBRARY_KERNELS, _widths_of, access_widths
from grader.tests.test_profile import REPO, kernels


def test_a_float4_kernels_sixteen_sectors_are_coalesced() -> None:
    """The reference's fast matmul stores C as float4s: 16 sectors per warp request is every byte used. The
    H200 report told it to 'let thread i touch element i' (4 sectors assumed); the kernel's PTX says 16 bytes."""
    fast = kernels("matmul-fast")["fast::matmul_fast_kernel<1>"]
    assert fast.metrics["st_sectors"] == pytest.approx(16.0, abs=0.1)
    assert any("touch 16 sectors per warp request where 4 would do" in a for a in advice.advise(fast))
    ptx = ("//\n.visible .entry _ZN4fast18matmul_fast_kernelILb1EEEvPKfS2_Pfiii(\n.param .u64 p\n)\n{\n"
           "ld.global.nc.f32 %f1, [%rd1];\nst.global.v4.f32 [%rd2], {%f1, %f1, %f1, %f1};\nret;\n}\n"
           ".visible .entry _Z14scatter_kernelPf(\n.param .u64 p\n)\n{\nst.global.u8 [%rd2], %rs1;\nret;\n}\n")
    widths = access_widths(ptx)
    assert widths == {"_ZN4fast18matmul_fast_kernelILb1EEEvPKfS2_Pfiii": (4, 16), "_Z14scatter_kernelPf": (4, 4)}
    assert access_widths(None) is None
    # ncu names the instance <1> where c++filt says <true>.
    w = _widths_of("void fast::matmul_fast_kernel<1>(const float *, const float *, float *, int, int, int)", widths)
    assert w == (4, 16)
    fast.metrics["ld_access_bytes"], fast.metrics["st_access_bytes"] = map(float, w)
    assert not any("sectors per warp request" in a for a in advice.advise(fast))
    # 4-byte stores 32 sectors apart stay scattered (the naive transpose).
    naive = kernels("transpose")["transpose_naive_kernel"]
    naive.metrics["st_access_bytes"] = 4.0
    assert any("touch 32 sectors per warp request where 4 would do for 4-byte accesses" in a
               for a in advice.advise(naive))


def test_the_references_fast_kernel_stores_float4s(tmp_path: Path) -> None:
    """The same widths read from the PTX nvcc makes of lab 05's reference (no GPU needed)."""
    nvcc = find_nvcc()
    if nvcc is None:
        pytest.skip("no nvcc here: the PTX cannot be made")
    out = tmp_path / "matmul.ptx"
    subprocess.run([nvcc, "-ptx", "-arch=sm_90", "-std=c++17", "-I", str(REPO / "common" / "include"), "-I",
                    str(REPO / "labs" / "05-tiled-matmul"), str(REPO / "solutions" / "05-tiled-matmul" / "matmul.cu"),
                    "-o", str(out)], check=True, capture_output=True, timeout=300)
    widths = access_widths(out.read_text())
    by_name = {advice.short_name(d): widths[m] for m, d in demangle(list(widths)).items()}
    assert by_name["fast::matmul_fast_kernel<true>"] == (4, 16)
    assert by_name["matmul_tiled_kernel"] == (4, 4) and by_name["transpose_padded_kernel"] == (4, 4)
    # ncu names the kernel without its namespace, as it did on the H200: the widths are still found.
    assert _widths_of("void matmul_fast_kernel<1>(const float *, const float *, float *, int, int, int)",
                      widths) == (4, 16)
    assert _widths_of("matmul_tiled_kernel(const float *, const float *, float *, int, int, int)", widths) == (4, 4)


def test_a_reduction_is_told_about_bandwidth_not_register_tiles() -> None:
    """On the H200 every lab 06 kernel and lab 03's SoA scale were told to 'give each thread several outputs
    (a register tile)': advice for a matmul. At 0.24 FLOP per byte the speed is the bandwidth."""
    inter = kernels("reduce-interleaved")["reduce_interleaved_kernel<float>"]
    soa = kernels("aos-soa")["scale_x_soa_kernel"]
    for k in (inter, soa):
        said = " ".join(advice.advise(k))
        assert "register tile" not in said and "FLOP per byte it moves" in said and "16-byte loads" in said
    tiled = kernels("matmul-fast")["matmul_tiled_kernel"]  # 16 FLOP per byte: the register tile is the lesson
    assert any("register tile" in a for a in advice.advise(tiled))


def test_the_library_column_is_the_algorithms_main_kernel() -> None:
    """A perf test's library baseline is profiled as CUB's main kernel of the algorithm, never the
    transform kernel the test's input changes launch first (lab 06's library column on the H200), nor the
    Init kernel that runs before a scan or a histogram sweep."""
    ns = "void cub::CUB_300000_SM_900_NS::"

    def first(baseline: str, launches: list[str]) -> str | None:
        return next((k for k in launches if re.search(LIBRARY_KERNELS[baseline], k)), None)

    transform = ns + "detail::transform::transform_kernel<policy_hub<0, tuple<float>>>(long, int)"
    reduce_main = ns + "detail::reduce::DeviceReduceKernel<policy_hub<float>, float *, float *>(float *, int)"
    reduce_tail = ns + "detail::reduce::DeviceReduceSingleTileKernel<policy_hub<float>, float *>(float *, int)"
    assert first("cub", [transform, reduce_main, reduce_tail]) == reduce_main
    scan_init = ns + "detail::scan::DeviceScanInitKernel<ScanTileState<int, true>>(ScanTileState<int, true>, int)"
    scan_main = ns + "detail::scan::DeviceScanKernel<policy_hub<int>, int *, int *>(int *, int *, int)"
    assert first("cub", [transform, scan_init, scan_main]) == scan_main
    hist_init = ns + "DeviceHistogramInitKernel<256, int>(ArrayWrapper<int, 1>, GridQueue<int>)"
    hist_main = ns + "DeviceHistogramSweepKernel<policy_hub, 256, 1, 1, unsigned char *, int>(unsigned char *)"
    assert first("cub", [hist_init, hist_main]) == hist_main
    merge = ns + "detail::merge_sort::DeviceMergeSortBlockSortKernel<policy_hub, unsigned *>(bool, unsigned *)"
    assert first("thrust_merge", [transform, merge]) == merge
    assert first("cub", [transform]) is None
