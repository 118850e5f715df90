// SPDX-License-Identifier: Apache-2.0
#include "core/dtype.hpp"

namespace ckpt::core {

namespace {
struct Info {
    const char* name;
    size_t size;
    size_t swap_unit;
};
constexpr Info kInfo[] = {
    {nullptr, 0, 0},        {"bool", 1, 1},          {"int8", 1, 1},        {"int16", 2, 2},
    {"int32", 4, 4},        {"int64", 8, 8},         {"uint8", 1, 1},       {"uint16", 2, 2},
    {"uint32", 4, 4},       {"uint64", 8, 8},        {"float16", 2, 2},     {"float32", 4, 4},
    {"float64", 8, 8},      {"complex64", 8, 4},     {"complex128", 16, 8}, {"unicode", 0, 4},
    {"bytes", 0, 1},        {"bfloat16", 2, 2},      {"float8_e4m3fn", 1, 1}, {"float8_e5m2", 1, 1},
    {"float8_e4m3fnuz", 1, 1}, {"float8_e5m2fnuz", 1, 1}, {"float8_e8m0fnu", 1, 1}, {"void", 0, 1},
};
constexpr uint32_t kLast = static_cast<uint32_t>(DType::void_);
static_assert(sizeof kInfo / sizeof kInfo[0] == kLast + 1, "one Info per DType");
}  // namespace

bool is_dtype(uint32_t value) { return value >= 1 && value <= kLast; }
size_t numeric_size(DType d) { return kInfo[static_cast<uint32_t>(d)].size; }
const char* dtype_name(DType d) { return kInfo[static_cast<uint32_t>(d)].name; }
size_t swap_unit(DType d) { return kInfo[static_cast<uint32_t>(d)].swap_unit; }

std::optional<DType> dtype_named(std::string_view name) {
    for (uint32_t v = 1; v <= kLast; ++v)
        if (name == kInfo[v].name) return DType(v);
    return std::nullopt;
}

}  // namespace ckpt::core
