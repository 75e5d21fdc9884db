/// gemm: one descriptor for every matrix product. Our tensors are row-major; BLAS back ends are
/// called in column-major mode (cuBLAS only has that), through the pure mapping below, which a
/// CPU test checks with column-major cblas_sgemm so the cuBLAS argument order is tested without a
/// GPU.
#pragma once
#if !defined(GOSSIP_ROOM_COMPUTE)
#error "gossip/gemm.hpp belongs to room compute, which this room does not use (see the room table in meson.build)"
#endif

namespace gossip {

/// Row-major C[m x n] = alpha * op(A)[m x k] * op(B)[k x n] + beta * C.
/// lda/ldb/ldc are row strides of the stored (untransposed) matrices.
struct RowMajorGemm {
  bool trans_a = false;
  bool trans_b = false;
  int m = 0, n = 0, k = 0;
  float alpha = 1.0f;
  int lda = 0, ldb = 0, ldc = 0;
  float beta = 0.0f;
};

/// The same product as a column-major call: C^T = op(B)^T * op(A)^T, i.e. the operands swapped.
/// `first_is_b` says the first operand pointer passed to BLAS is the row-major B.
struct ColumnMajorGemm {
  bool trans_first = false;   // transpose flag for the first operand (row-major B)
  bool trans_second = false;  // transpose flag for the second operand (row-major A)
  int m = 0, n = 0, k = 0;    // column-major sizes
  float alpha = 1.0f;
  int ld_first = 0, ld_second = 0, ldc = 0;
  float beta = 0.0f;
};

/// Pure mapping from a row-major product to the column-major call that computes it.
constexpr ColumnMajorGemm to_column_major(const RowMajorGemm& g) {
  ColumnMajorGemm c;
  c.trans_first = g.trans_b;
  c.trans_second = g.trans_a;
  c.m = g.n;
  c.n = g.m;
  c.k = g.k;
  c.alpha = g.alpha;
  c.ld_first = g.ldb;
  c.ld_second = g.lda;
  c.ldc = g.ldc;
  c.beta = g.beta;
  return c;
}

/// Descriptor with tight leading dimensions for C[m x n] = op(A) op(B).
constexpr RowMajorGemm row_major_gemm(bool trans_a, bool trans_b, int m, int n, int k,
                                      float alpha = 1.0f, float beta = 0.0f) {
  RowMajorGemm g;
  g.trans_a = trans_a;
  g.trans_b = trans_b;
  g.m = m;
  g.n = n;
  g.k = k;
  g.alpha = alpha;
  g.beta = beta;
  g.lda = trans_a ? m : k;
  g.ldb = trans_b ? k : n;
  g.ldc = n;
  return g;
}

}  // namespace gossip
