// SPDX-License-Identifier: Apache-2.0
/*
 * ckpt.hpp — the C++ interface to ckpt: RAII handles, exceptions and typed arrays over the C API of ckpt/ckpt.h.
 *
 * Header-only; it uses nothing but ckpt/ckpt.h and the standard library (C++17; std::span under C++20), so a program
 * links libckpt exactly as a C program does. ckpt/ckpt.h stays the reference for what every operation does and for
 * the file format; the comments here say what the C++ layer adds and where it differs.
 *
 * This header includes the binding's parts, one per handle, under ckpt/cpp/ (docs/cpp.md lists them); include this
 * one, not the parts. One part is left out on purpose: ckpt/cpp/s3.hpp (ckpt::S3Options, storages over an S3
 * bucket configured in code) calls libckpt_s3, so a program that includes it also links that library (pkg-config
 * ckpt-s3, CMake ckpt::s3). s3://bucket/key paths need neither: libckpt loads libckpt_s3 itself for them.
 *
 * Conventions that hold for everything below:
 *
 *  - Every operation that can fail throws ckpt::Error (a std::runtime_error) carrying the CKPT_* code and the
 *    message of ckpt_error_message(). When an exception thrown by your own code (a Storage or Comm method, a save
 *    function, a renamer) caused the failure, the message says its what(), once. Checks made by this header itself
 *    (a wrong element type, a shape that does not fit the data) throw Error too, with the code a C call would give.
 *  - Handles (Vars, Reader, Writer, Manager) are move-only: copying is deleted, moving leaves the source empty
 *    (`!handle`, native() == nullptr) and safe to destroy; calling a method on an empty handle throws
 *    Error(CKPT_EINVAL) or, for getters, behaves as the C getter does for NULL. Destructors never throw.
 *  - Ownership is ckpt.h's: views and string_views returned by getters are borrowed from their handle and live
 *    until it is modified or destroyed; borrowed arrays (Vars::borrow) must outlive every use of the collection.
 *  - A handle is used by one thread at a time; different handles may be used from different threads. Callbacks
 *    (Storage methods, save functions, progress and log functions) may run on ckpt's own threads.
 */
#ifndef CKPT_CKPT_HPP
#define CKPT_CKPT_HPP

#include <ckpt/ckpt.h>

#include <ckpt/cpp/error.hpp>
#include <ckpt/cpp/metadata.hpp>
#include <ckpt/cpp/dtype.hpp>
#include <ckpt/cpp/array.hpp>
#include <ckpt/cpp/storage.hpp>
#include <ckpt/cpp/files.hpp>
#include <ckpt/cpp/comm.hpp>
#include <ckpt/cpp/options.hpp>
#include <ckpt/cpp/vars.hpp>
#include <ckpt/cpp/reader.hpp>
#include <ckpt/cpp/tree.hpp>
#include <ckpt/cpp/earlier_names.hpp>
#include <ckpt/cpp/step.hpp>
#include <ckpt/cpp/writer.hpp>
#include <ckpt/cpp/manager.hpp>

#endif  // CKPT_CKPT_HPP
