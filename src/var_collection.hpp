// VarCollection: named arrays in insertion order (the save order), names unique.
#pragma once

#include "array.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace ckpt {

class VarCollection {
public:
    // Appends; throws Error(invalid) for an empty name or one holding NUL, Error(exists) for a taken name.
    void add(std::string name, Array array);
    size_t size() const { return entries_.size(); }
    const std::string& name(size_t i) const { return entries_[i].first; }
    const Array& array(size_t i) const { return entries_[i].second; }
    std::optional<size_t> find(std::string_view name) const;

private:
    std::vector<std::pair<std::string, Array>> entries_;
    std::unordered_map<std::string, size_t> index_;
};

}  // namespace ckpt
