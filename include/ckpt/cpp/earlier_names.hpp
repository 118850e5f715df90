// SPDX-License-Identifier: Apache-2.0
/* ckpt/cpp/earlier_names.hpp — ckpt.h's functions of checkpoint files under their names before 0.11 ("Names before
 * 0.11") are the binding's functions: each has the very type of the function it names, so that C code calling the
 * earlier names takes the handles and options the binding gives (ckpt::Reader::get(), ckpt::Options). Checked when
 * the binding is compiled. Part of the C++ binding: include <ckpt/ckpt.hpp>, which includes every part. */
#ifndef CKPT_CPP_EARLIER_NAMES_HPP
#define CKPT_CPP_EARLIER_NAMES_HPP

#include <ckpt/ckpt.h>

#include <type_traits>

namespace ckpt::detail {

template <typename Earlier, typename Name>
constexpr bool same_function = std::is_same_v<Earlier, Name>;

static_assert(same_function<decltype(&ckpt_npz_options_init), decltype(&ckpt_options_init)>,
              "ckpt_npz_options_init is ckpt_options_init");
static_assert(same_function<decltype(&ckpt_npz_save), decltype(&ckpt_save)>, "ckpt_npz_save is ckpt_save");
static_assert(same_function<decltype(&ckpt_npz_read), decltype(&ckpt_read)>, "ckpt_npz_read is ckpt_read");
static_assert(same_function<decltype(&ckpt_npz_read_memory), decltype(&ckpt_read_memory)>,
              "ckpt_npz_read_memory is ckpt_read_memory");
static_assert(same_function<decltype(&ckpt_npz_restore), decltype(&ckpt_restore)>, "ckpt_npz_restore is ckpt_restore");
static_assert(same_function<decltype(&ckpt_npz_close), decltype(&ckpt_reader_close)>,
              "ckpt_npz_close is ckpt_reader_close");
static_assert(same_function<decltype(&ckpt_npz_count), decltype(&ckpt_reader_count)>,
              "ckpt_npz_count is ckpt_reader_count");
static_assert(same_function<decltype(&ckpt_npz_name), decltype(&ckpt_reader_name)>,
              "ckpt_npz_name is ckpt_reader_name");
static_assert(same_function<decltype(&ckpt_npz_find), decltype(&ckpt_reader_find)>,
              "ckpt_npz_find is ckpt_reader_find");
static_assert(same_function<decltype(&ckpt_npz_dtype), decltype(&ckpt_reader_dtype)>,
              "ckpt_npz_dtype is ckpt_reader_dtype");
static_assert(same_function<decltype(&ckpt_npz_itemsize), decltype(&ckpt_reader_itemsize)>,
              "ckpt_npz_itemsize is ckpt_reader_itemsize");
static_assert(same_function<decltype(&ckpt_npz_ndim), decltype(&ckpt_reader_ndim)>,
              "ckpt_npz_ndim is ckpt_reader_ndim");
static_assert(same_function<decltype(&ckpt_npz_shape), decltype(&ckpt_reader_shape)>,
              "ckpt_npz_shape is ckpt_reader_shape");
static_assert(same_function<decltype(&ckpt_npz_nbytes), decltype(&ckpt_reader_nbytes)>,
              "ckpt_npz_nbytes is ckpt_reader_nbytes");
static_assert(same_function<decltype(&ckpt_npz_read_into), decltype(&ckpt_reader_read_into)>,
              "ckpt_npz_read_into is ckpt_reader_read_into");
static_assert(same_function<decltype(&ckpt_npz_read_range), decltype(&ckpt_reader_read_range)>,
              "ckpt_npz_read_range is ckpt_reader_read_range");
static_assert(same_function<decltype(&ckpt_npz_member_name), decltype(&ckpt_reader_member_name)>,
              "ckpt_npz_member_name is ckpt_reader_member_name");
static_assert(same_function<decltype(&ckpt_npz_compression), decltype(&ckpt_reader_compression)>,
              "ckpt_npz_compression is ckpt_reader_compression");
static_assert(same_function<decltype(&ckpt_npz_stored_bytes), decltype(&ckpt_reader_stored_bytes)>,
              "ckpt_npz_stored_bytes is ckpt_reader_stored_bytes");
static_assert(same_function<decltype(&ckpt_npz_crc32), decltype(&ckpt_reader_crc32)>,
              "ckpt_npz_crc32 is ckpt_reader_crc32");
static_assert(same_function<decltype(&ckpt_npz_data_offset), decltype(&ckpt_reader_data_offset)>,
              "ckpt_npz_data_offset is ckpt_reader_data_offset");
static_assert(same_function<decltype(&ckpt_npz_byte_order), decltype(&ckpt_reader_byte_order)>,
              "ckpt_npz_byte_order is ckpt_reader_byte_order");
static_assert(same_function<decltype(&ckpt_npz_fortran_order), decltype(&ckpt_reader_fortran_order)>,
              "ckpt_npz_fortran_order is ckpt_reader_fortran_order");
static_assert(same_function<decltype(&ckpt_npz_file_size), decltype(&ckpt_reader_file_size)>,
              "ckpt_npz_file_size is ckpt_reader_file_size");
static_assert(same_function<decltype(&ckpt_npz_layout), decltype(&ckpt_reader_layout)>,
              "ckpt_npz_layout is ckpt_reader_layout");
static_assert(same_function<decltype(&ckpt_npz_format), decltype(&ckpt_reader_format)>,
              "ckpt_npz_format is ckpt_reader_format");
static_assert(same_function<decltype(&ckpt_npz_metadata), decltype(&ckpt_reader_metadata)>,
              "ckpt_npz_metadata is ckpt_reader_metadata");
static_assert(same_function<decltype(&ckpt_npz_metadata_count), decltype(&ckpt_reader_metadata_count)>,
              "ckpt_npz_metadata_count is ckpt_reader_metadata_count");
static_assert(same_function<decltype(&ckpt_npz_metadata_key), decltype(&ckpt_reader_metadata_key)>,
              "ckpt_npz_metadata_key is ckpt_reader_metadata_key");
static_assert(same_function<decltype(&ckpt_npz_metadata_value), decltype(&ckpt_reader_metadata_value)>,
              "ckpt_npz_metadata_value is ckpt_reader_metadata_value");
static_assert(same_function<decltype(&ckpt_npz_map), decltype(&ckpt_reader_map)>, "ckpt_npz_map is ckpt_reader_map");
static_assert(same_function<decltype(&ckpt_npz_map_vars), decltype(&ckpt_reader_map_vars)>,
              "ckpt_npz_map_vars is ckpt_reader_map_vars");
static_assert(same_function<decltype(&ckpt_npz_open), decltype(&ckpt_reader_open)>,
              "ckpt_npz_open is ckpt_reader_open");

}  // namespace ckpt::detail

#endif
