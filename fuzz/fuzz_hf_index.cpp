// SPDX-License-Identifier: Apache-2.0
// Fuzzes the parser of Hugging Face's model.safetensors.index.json on arbitrary bytes. ckpt::core::Error (format) is
// the expected answer to bad input; any other exception, a crash, UB or a leak is a bug. An index the parser accepts
// names only shards of its own folder, and survives ckpt's own writing: format_hf_index of it parses back the same.
// The text is also read by json_sax_plain, the fast reader of indexes and safetensors headers: where it reads the text
// itself, its events must be nlohmann's, and nlohmann's must not end in an error.
#include "core/error.hpp"
#include "fuzz_support.hpp"
#include "safetensors/hf_index.hpp"
#include "support/json_events.hpp"

#include <algorithm>
#include <optional>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    if (text.find('\0') == std::string_view::npos) {  // nlohmann takes a NUL for the end of the text
        const auto plain = ckpt::testing::plain_events(text);
        if (plain) FUZZ_CHECK(*plain == ckpt::testing::nlohmann_events(text) && plain->back() != "error");
    }
    std::optional<ckpt::core::HfIndex> index;
    try {
        index = ckpt::core::parse_hf_index(text);
    } catch (const ckpt::core::Error& e) {
        FUZZ_CHECK(e.code() == ckpt::core::Code::format);
        return 0;
    }
    for (const auto& entry : index->weight_map) FUZZ_CHECK(ckpt::core::shard_name_problem(entry.second) == nullptr);
    const ckpt::core::HfIndex again = ckpt::core::parse_hf_index(ckpt::core::format_hf_index(*index));
    FUZZ_CHECK(again.total_size == index->total_size && again.save_id == index->save_id);
    auto sorted = index->weight_map;
    std::sort(sorted.begin(), sorted.end());
    FUZZ_CHECK(again.weight_map == sorted);  // written with sorted keys, as transformers writes them
    return 0;
}
