// libcublasLt.so.13 CPU stand-in: the matmul path greyhound's validation uses for its FP8 GEMM
// (cublasLtMatmul with a heuristic-chosen algorithm), and plain FP32, FP16 and BF16 matmuls. Results are
// computed for real (gemm_ref.h), then the call lasts its modeled device time (2mnk / gemm_gflops, scaled by
// the rank's GPU fault), as the cuBLAS stand-in's GEMMs do.
//
// What real cuBLASLt requires of an FP8 matmul is required here too, so that the simulated cluster refuses
// what a GPU would: a device of compute capability 8.9 or more (the model's), A transposed and B not (the
// "TN" layout), not both inputs E5M2, FP32 compute and scale types, C and D of one type (BF16, FP16 or FP32;
// FP8 outputs are not modeled), and dimensions and leading dimensions in multiples of 16. Attributes the
// stand-in does not model (scale pointers, epilogues, batches, orders) are refused with
// CUBLAS_STATUS_NOT_SUPPORTED rather than ignored, so that nothing computes other than it says.
#include <cublasLt.h>

#include <cstdint>
#include <cstring>

#include "sim/gemm_ref.h"
#include "sim/sim_process.h"

namespace gs = greyhound::sim;

struct cublasLtContext {
  int unused = 0;
};

namespace {

// What the stand-in keeps in cuBLASLt's semi-opaque descriptors (their `data` words), with a magic word
// that tells a descriptor it made from one it did not.
constexpr std::uint64_t kDescMagic = 0x67686c7464657363ull;
constexpr std::uint64_t kAlgoMagic = 0x67686c74616c676full;  // the one algorithm the stand-in offers
struct Desc {
  std::uint64_t magic = kDescMagic;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  cudaDataType scale = CUDA_R_32F;
  cublasOperation_t transa = CUBLAS_OP_N;
  cublasOperation_t transb = CUBLAS_OP_N;
};
struct Layout {
  std::uint64_t magic = kDescMagic;
  cudaDataType type = CUDA_R_32F;
  std::uint64_t rows = 0, cols = 0;
  std::int64_t ld = 0;
};
struct Pref {
  std::uint64_t magic = kDescMagic;
  std::uint64_t max_workspace = 0;
};
static_assert(sizeof(Desc) <= sizeof(cublasLtMatmulDescOpaque_t::data));
static_assert(sizeof(Layout) <= sizeof(cublasLtMatrixLayoutOpaque_t::data));
static_assert(sizeof(Pref) <= sizeof(cublasLtMatmulPreferenceOpaque_t::data));

template <typename S, typename O>
bool get(const O* o, S* s) {
  if (o == nullptr) return false;
  std::memcpy(s, o->data, sizeof *s);
  return s->magic == kDescMagic;
}
template <typename S, typename O>
void put(O* o, const S& s) {
  std::memcpy(o->data, &s, sizeof s);
}

bool fp8(cudaDataType t) { return t == CUDA_R_8F_E4M3 || t == CUDA_R_8F_E5M2; }

// One matmul as the stand-in runs it: m x n output, k inner.
struct Matmul {
  Desc op;
  Layout a, b, c, d;
  int m = 0, n = 0, k = 0;
};

// Whether the stand-in (and real cuBLASLt, for FP8) runs this matmul.
cublasStatus_t check(cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                     cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d, Matmul* mm) {
  if (!get(op, &mm->op) || !get(a, &mm->a) || !get(b, &mm->b) || !get(c, &mm->c) || !get(d, &mm->d)) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  const Layout &la = mm->a, &lb = mm->b, &lc = mm->c, &ld = mm->d;
  const bool ta = mm->op.transa == CUBLAS_OP_T;
  const bool tb = mm->op.transb == CUBLAS_OP_T;
  const std::uint64_t am = ta ? la.cols : la.rows, ak = ta ? la.rows : la.cols;
  const std::uint64_t bk = tb ? lb.cols : lb.rows, bn = tb ? lb.rows : lb.cols;
  if (ak != bk || ld.rows != am || ld.cols != bn || lc.rows != ld.rows || lc.cols != ld.cols) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (am > (1u << 30) || bn > (1u << 30) || ak > (1u << 30)) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (mm->op.compute != CUBLAS_COMPUTE_32F || mm->op.scale != CUDA_R_32F) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (!gs::gemm_input_type(la.type) || !gs::gemm_input_type(lb.type) || !gs::gemm_output_type(ld.type) ||
      lc.type != ld.type) {
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  if (fp8(la.type) || fp8(lb.type)) {
    if (!fp8(la.type) || !fp8(lb.type) || (la.type == CUDA_R_8F_E5M2 && lb.type == CUDA_R_8F_E5M2)) {
      return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    if (gs::sim_process().model.compute_capability < 89) return CUBLAS_STATUS_ARCH_MISMATCH;
    if (!ta || tb) return CUBLAS_STATUS_NOT_SUPPORTED;  // the "TN" layout only
    for (const Layout* l : {&la, &lb, &lc, &ld}) {
      if (l->rows % 16 != 0 || l->cols % 16 != 0 || l->ld % 16 != 0) return CUBLAS_STATUS_NOT_SUPPORTED;
    }
  } else if (la.type != lb.type) {
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  mm->m = static_cast<int>(am);
  mm->n = static_cast<int>(bn);
  mm->k = static_cast<int>(ak);
  return CUBLAS_STATUS_SUCCESS;
}

template <typename T>
cublasStatus_t read_attribute(const void* buf, std::size_t size, T* out) {
  if (buf == nullptr || size != sizeof(T)) return CUBLAS_STATUS_INVALID_VALUE;
  std::memcpy(out, buf, sizeof(T));
  return CUBLAS_STATUS_SUCCESS;
}

}  // namespace

#pragma GCC visibility push(default)
extern "C" {

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) {
  if (handle == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *handle = new cublasLtContext();
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

size_t cublasLtGetVersion(void) { return CUBLAS_VERSION; }

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t compute, cudaDataType_t scale) {
  if (desc == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *desc = new cublasLtMatmulDescOpaque_t{};
  Desc d;
  d.compute = compute;
  d.scale = scale;
  put(*desc, d);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  delete desc;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                                              const void* buf, size_t size) {
  Desc d;
  if (!get(desc, &d)) return CUBLAS_STATUS_INVALID_VALUE;
  std::int32_t v = 0;
  switch (attr) {
    case CUBLASLT_MATMUL_DESC_TRANSA:
    case CUBLASLT_MATMUL_DESC_TRANSB: {
      if (const cublasStatus_t s = read_attribute(buf, size, &v); s != CUBLAS_STATUS_SUCCESS) return s;
      if (v != CUBLAS_OP_N && v != CUBLAS_OP_T) return CUBLAS_STATUS_INVALID_VALUE;
      (attr == CUBLASLT_MATMUL_DESC_TRANSA ? d.transa : d.transb) = static_cast<cublasOperation_t>(v);
      put(desc, d);
      return CUBLAS_STATUS_SUCCESS;
    }
    case CUBLASLT_MATMUL_DESC_POINTER_MODE:  // host alpha and beta: the only mode modeled
      if (const cublasStatus_t s = read_attribute(buf, size, &v); s != CUBLAS_STATUS_SUCCESS) return s;
      return v == CUBLASLT_POINTER_MODE_HOST ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_SUPPORTED;
    default:
      return CUBLAS_STATUS_NOT_SUPPORTED;
  }
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
  if (layout == nullptr || ld < 1 || static_cast<std::uint64_t>(ld) < rows) return CUBLAS_STATUS_INVALID_VALUE;
  *layout = new cublasLtMatrixLayoutOpaque_t{};
  Layout l;
  l.type = type;
  l.rows = rows;
  l.cols = cols;
  l.ld = ld;
  put(*layout, l);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  delete layout;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  if (pref == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *pref = new cublasLtMatmulPreferenceOpaque_t{};
  put(*pref, Pref{});
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  delete pref;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr, const void* buf,
                                                    size_t size) {
  Pref p;
  if (!get(pref, &p)) return CUBLAS_STATUS_INVALID_VALUE;
  if (attr != CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (const cublasStatus_t s = read_attribute(buf, size, &p.max_workspace); s != CUBLAS_STATUS_SUCCESS) return s;
  put(pref, p);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t op,
                                              cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                              cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                              cublasLtMatmulPreference_t pref, int requested,
                                              cublasLtMatmulHeuristicResult_t results[], int* returned) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  Pref p;
  if (requested <= 0 || results == nullptr || returned == nullptr || !get(pref, &p)) return CUBLAS_STATUS_INVALID_VALUE;
  *returned = 0;
  Matmul mm;
  if (const cublasStatus_t s = check(op, a, b, c, d, &mm); s != CUBLAS_STATUS_SUCCESS) {
    return s == CUBLAS_STATUS_INVALID_VALUE ? s : CUBLAS_STATUS_NOT_SUPPORTED;  // no kernel for it
  }
  std::memset(&results[0], 0, sizeof results[0]);
  results[0].algo.data[0] = kAlgoMagic;
  results[0].workspaceSize = 0;  // within any workspace the preference allows
  results[0].state = CUBLAS_STATUS_SUCCESS;
  results[0].wavesCount = 1.0f;
  *returned = 1;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t op, const void* alpha, const void* A,
                              cublasLtMatrixLayout_t a, const void* B, cublasLtMatrixLayout_t b, const void* beta,
                              const void* C, cublasLtMatrixLayout_t c, void* D, cublasLtMatrixLayout_t d,
                              const cublasLtMatmulAlgo_t* algo, void*, size_t, cudaStream_t) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (alpha == nullptr || beta == nullptr || A == nullptr || B == nullptr || D == nullptr) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (algo != nullptr && algo->data[0] != kAlgoMagic) return CUBLAS_STATUS_INVALID_VALUE;  // not one it offered
  Matmul mm;
  if (const cublasStatus_t s = check(op, a, b, c, d, &mm); s != CUBLAS_STATUS_SUCCESS) return s;
  const float al = *static_cast<const float*>(alpha);  // FP32 scale type
  const float be = *static_cast<const float*>(beta);
  if (be != 0.0f && C == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  const double flops = 2.0 * mm.m * mm.n * static_cast<double>(mm.k);
  gs::device_kernel(flops, true, [&] {
    gs::reference_gemm(mm.m, mm.n, mm.k, al, {A, mm.a.type, mm.a.ld, mm.op.transa == CUBLAS_OP_T},
                       {B, mm.b.type, mm.b.ld, mm.op.transb == CUBLAS_OP_T}, be, {C, mm.c.type, mm.c.ld}, D,
                       mm.d.type, mm.d.ld);
  });
  return CUBLAS_STATUS_SUCCESS;
}

}  // extern "C"
#pragma GCC visibility pop

__attribute__((constructor)) static void greyhound_sim_cublaslt_load() { (void)gs::sim_process(); }
