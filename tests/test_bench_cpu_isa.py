"""A benchmark's result names the CPU's vector instruction sets (AVX2, AVX-512, AVX-VNNI, AMX), in its file and in
the line it prints: the ratios between rules depend on them."""
from rrlib.speed import bench

SAPPHIRE_RAPIDS = ("fpu sse2 avx2 fma avx512f avx512bw avx512vl avx512_bf16 avx512_vnni avx_vnni amx_bf16 amx_tile "
                   "amx_int8")
EPYC = "fpu sse2 avx2 fma sha_ni"


def test_vector_isa_lists_the_flags_that_matter_in_a_fixed_order():
    assert bench.vector_isa(SAPPHIRE_RAPIDS) == ["avx2", "fma", "avx_vnni", "avx512f", "avx512bw", "avx512vl",
                                                 "avx512_vnni", "avx512_bf16", "amx_tile", "amx_bf16", "amx_int8"]
    assert bench.vector_isa(EPYC) == ["avx2", "fma"]
    assert bench.vector_isa("") == []


def test_the_result_and_its_printed_line_name_the_vector_isa():
    cpu = bench.cpu_description()
    assert isinstance(cpu["vector_isa"], list)
    result = {"results": [], "out_of_memory": [], "sweep": None, "tokenize": None}
    row = {key: None for _, key, _ in bench.TABLE_COLUMNS}
    result.update(results=[row], cpu={**cpu, "vector_isa": ["avx2", "avx512f", "amx_tile"]}, device="cpu",
                  torch_version="x", precision="fp32", compile=False, git_commit="abc", steps=1, repeats=1, warmup=1,
                  peak_flops_source="none", peak_memory_kind="none")
    assert "vector ISA avx2 avx512f amx_tile," in bench.render(result)
