// SPDX-License-Identifier: Apache-2.0
// The page `ckpt report` writes, drawn from the report's JSON document (docs/cli.md has its schema): one HTML file
// with its CSS and SVG charts inline and no script, under a Content-Security-Policy that lets it fetch nothing, so
// it opens offline in any browser; light or dark as the reader's system is, and printable. Hovering a point, cell
// or bar shows its value (SVG titles).
#pragma once

#include "values.hpp"

#include <string>

namespace ckpt_tool {

std::string report_page(const Json& report);

// The same escaped for HTML text and attribute values: & < > " '.
std::string html_escape(const std::string& text);

}  // namespace ckpt_tool
