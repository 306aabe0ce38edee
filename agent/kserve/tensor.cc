#include "agent/kserve/tensor.h"

#include <charconv>

namespace packrat {
namespace {

// Product of `shape[begin..]`, or -1 if a dimension is negative or the product overflows int64.
int64_t DimProduct(const std::vector<int64_t>& shape, size_t begin) {
  int64_t product = 1;
  for (size_t i = begin; i < shape.size(); ++i) {
    if (shape[i] < 0) return -1;
    if (__builtin_mul_overflow(product, shape[i], &product)) return -1;
  }
  return product;
}

}  // namespace

int64_t TensorSpec::RowBytes() const {
  const int64_t elements = DimProduct(shape, 1);
  if (elements < 0) return -1;
  int64_t bytes = 0;
  if (__builtin_mul_overflow(elements, static_cast<int64_t>(DataTypeSize(datatype)), &bytes)) {
    return -1;
  }
  return bytes;
}

int64_t ElementCount(const std::vector<int64_t>& shape) { return DimProduct(shape, 0); }

std::string ShapeToString(const std::vector<int64_t>& shape) {
  std::string out = "[";
  char buf[24];
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) out += ',';
    const auto result = std::to_chars(buf, buf + sizeof(buf), shape[i]);
    out.append(buf, result.ptr);
  }
  out += ']';
  return out;
}

}  // namespace packrat
