// SPDX-License-Identifier: Apache-2.0
#include "report_page.hpp"

#include "checkpoint_dir.hpp"
#include "location.hpp"
#include "text.hpp"

#include <ckpt/ckpt.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>
#include <vector>

namespace ckpt_tool {
namespace {

// Colours are the stylesheet's variables, so one drawing serves the light and the dark page.
constexpr char kStyle[] = R"(
:root{--bg:#ffffff;--fg:#1f2328;--muted:#59636e;--grid:#d8dee4;--card:#f6f8fa;--line:#0969da;--best:#1a7f37;
--bad:#cf222e;--warn:#9a6700;--frozen:#8c959f;--bar:#0969da}
@media (prefers-color-scheme:dark){:root{--bg:#0d1117;--fg:#e6edf3;--muted:#9198a1;--grid:#30363d;--card:#161b22;
--line:#4493f8;--best:#3fb950;--bad:#f85149;--warn:#d29922;--frozen:#656c76;--bar:#4493f8}}
html{color-scheme:light dark}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;background:var(--bg);color:var(--fg);
max-width:1280px;margin:0 auto;padding:16px 24px}
h1{font-size:22px;margin:8px 0 2px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid var(--grid);
padding-bottom:4px}
.sub,.note{color:var(--muted)}.note{font-size:13px}
code,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12.5px}
ul.warnings{list-style:none;padding:0;margin:0}
ul.warnings li{border-left:4px solid var(--warn);background:var(--card);padding:6px 10px;margin:4px 0}
ul.warnings li.nan,ul.warnings li.inf,ul.warnings li.unreadable{border-color:var(--bad)}
ul.warnings li.frozen{border-color:var(--frozen)}
ul.warnings b{display:inline-block;min-width:76px}
.ok{border-left:4px solid var(--best);background:var(--card);padding:6px 10px}
.charts{display:flex;flex-wrap:wrap;gap:12px}
figure{margin:0;background:var(--card);border-radius:6px;padding:6px}
figcaption{font-weight:600;font-size:13px;padding:0 4px}
svg text{fill:var(--muted);font-size:11px;font-family:system-ui,sans-serif}
svg .axis{stroke:var(--grid);stroke-width:1}
svg .line{fill:none;stroke:var(--line);stroke-width:1.6}
svg .point{fill:var(--line)}
svg .best{fill:none;stroke:var(--best);stroke-width:2.2}
svg .nonfinite{fill:var(--bad)}
svg .frozen{fill:var(--frozen)}
svg .bar{fill:var(--bar)}
svg .empty{fill:none;stroke:var(--grid)}
table{border-collapse:collapse;width:100%;font-size:13px}
th,td{text-align:left;padding:3px 8px;border-bottom:1px solid var(--grid);vertical-align:middle}
th{position:sticky;top:0;background:var(--bg)}
td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
td.bad{color:var(--bad);font-weight:600}
.scroll{overflow-x:auto}
.legend{display:flex;gap:16px;align-items:center;flex-wrap:wrap;margin:6px 0;color:var(--muted);font-size:12px}
.swatch{display:inline-block;width:12px;height:12px;border-radius:2px;vertical-align:middle;margin-right:4px}
@media print{body{max-width:none;padding:0}section{break-inside:avoid}th{position:static}.scroll{overflow:visible}}
)";

std::string esc(const std::string& s) { return html_escape(s); }

std::string num(double v) {
    if (std::isnan(v)) return "NaN";
    if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
    return fmt::format("{:.4g}", v);
}

// A JSON number, or "nan"/"inf"/"-inf" as json_number writes them, as a double; none for null.
std::optional<double> value_of(const Json& j) {
    if (j.is_number()) return j.get<double>();
    if (j.is_string()) {
        const std::string s = j.get<std::string>();
        if (s == "nan") return std::nan("");
        if (s == "inf") return HUGE_VAL;
        if (s == "-inf") return -HUGE_VAL;
    }
    return std::nullopt;
}

// A statistic as the table shows it: integers exactly, reals to 6 significant digits, "-" for none.
std::string stat_text(const Json& j) {
    if (j.is_number_integer()) return j.dump();
    const auto v = value_of(j);
    return v ? (std::isfinite(*v) ? fmt::format("{:.6g}", *v) : num(*v)) : "-";
}

// A metric's curve over the steps: a line through its finite values, a dot per checkpoint (hover: step and value),
// values that are not finite as red marks along the top, the best checkpoint ringed.
std::string metric_chart(const Json& m) {
    constexpr double W = 400, H = 190, L = 70, R = 14, T = 12, B = 30;
    const std::string name = m["name"];
    std::vector<double> xs, ys;  // steps (whole numbers) and values, where a checkpoint has one
    for (size_t k = 0; k < m["steps"].size(); ++k) {
        const auto v = value_of(m["values"][k]);
        if (!v) continue;
        xs.push_back(m["steps"][k].get<double>());
        ys.push_back(*v);
    }
    double x0 = xs.empty() ? 0 : *std::min_element(xs.begin(), xs.end());
    double x1 = xs.empty() ? 1 : *std::max_element(xs.begin(), xs.end());
    double y0 = HUGE_VAL, y1 = -HUGE_VAL;
    for (double y : ys)
        if (std::isfinite(y)) y0 = std::min(y0, y), y1 = std::max(y1, y);
    if (y0 > y1) y0 = 0, y1 = 1;
    if (y0 == y1) {
        const double pad = y0 == 0 ? 0.5 : std::fabs(y0) * 0.1;
        y0 -= pad, y1 += pad;
    }
    if (x0 == x1) x0 -= 1, x1 += 1;
    const double pad = (y1 - y0) * 0.06;
    y0 -= pad, y1 += pad;
    const auto sx = [&](double x) { return L + (x - x0) / (x1 - x0) * (W - L - R); };
    const auto sy = [&](double y) { return T + (y1 - y) / (y1 - y0) * (H - T - B); };
    std::string s = fmt::format(
        "<figure><figcaption>{}</figcaption><svg class=\"chart metric\" data-metric=\"{}\" width=\"{}\" height=\"{}\" "
        "viewBox=\"0 0 {} {}\" role=\"img\" aria-label=\"{} over the steps\">",
        esc(name), esc(name), W, H, W, H, esc(name));
    for (int k = 0; k <= 2; ++k) {  // three levels, labelled
        const double y = y0 + pad + (y1 - y0 - 2 * pad) * k / 2;
        s += fmt::format("<line class=\"axis\" x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\"/>", L, W - R, sy(y),
                         sy(y));
        s += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>", L - 6, sy(y) + 4, esc(num(y)));
    }
    s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"start\">step {:.0f}</text>", L, H - 8, x0);
    s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{:.0f}</text>", W - R, H - 8, x1);
    std::string path;
    for (size_t k = 0; k < xs.size(); ++k) {
        if (!std::isfinite(ys[k])) {
            path += " ";  // a gap
            continue;
        }
        path += fmt::format("{}{:.1f},{:.1f}", path.empty() || path.back() == ' ' ? "M" : "L", sx(xs[k]), sy(ys[k]));
    }
    if (!path.empty()) s += fmt::format("<path class=\"line\" d=\"{}\"/>", path);
    const Json& best = m["best_step"];
    for (size_t k = 0; k < xs.size(); ++k) {
        const double y = ys[k];
        const std::string step = fmt::format("{:.0f}", xs[k]);
        const std::string title = fmt::format("step {}: {} = {}", step, name, num(y));
        if (!std::isfinite(y)) {
            s += fmt::format(
                "<rect class=\"nonfinite point-nonfinite\" data-step=\"{}\" data-value=\"{}\" x=\"{:.1f}\" "
                "y=\"{}\" width=\"6\" height=\"6\"><title>{}</title></rect>",
                step, num(y), sx(xs[k]) - 3, T - 4, esc(title));
            continue;
        }
        const bool is_best = best.is_number() && best.get<double>() == xs[k];
        if (is_best)
            s += fmt::format(
                "<circle class=\"best\" cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"7\"><title>best: {}</title></circle>",
                sx(xs[k]), sy(y), esc(title));
        s += fmt::format(
            "<circle class=\"point\" data-step=\"{}\" data-value=\"{}\" cx=\"{:.1f}\" cy=\"{:.1f}\" "
            "r=\"3\"><title>{}</title></circle>",
            step, fmt::format("{}", y), sx(xs[k]), sy(y), esc(title));
    }
    return s + "</svg></figure>";
}

// A colour for a relative change from 1e-6 (or less) to 1 (or more), on a log scale: pale to dark, through a
// palette readable on light and dark pages alike.
std::string change_colour(double rel) {
    static const double stops[][3] = {{253, 231, 37}, {94, 201, 98}, {33, 145, 140}, {59, 82, 139}, {68, 1, 84}};
    const double t = std::clamp((std::log10(rel) + 6) / 6, 0.0, 1.0) * 4;
    const int i = std::min(static_cast<int>(t), 3);
    const double f = t - i;
    int c[3];
    for (int k = 0; k < 3; ++k) c[k] = static_cast<int>(std::lround(stops[i][k] + (stops[i + 1][k] - stops[i][k]) * f));
    return fmt::format("#{:02x}{:02x}{:02x}", c[0], c[1], c[2]);
}

// Arrays × checkpoints: each cell the relative change ‖x_t − x_{t−1}‖ / ‖x_{t−1}‖ of an array from the
// checkpoint before.
std::string change_map(const Json& changes) {
    std::set<int64_t> step_set;
    size_t longest = 0;
    for (const Json& c : changes) {
        for (const Json& s : c["steps"]) step_set.insert(s.get<int64_t>());
        longest = std::max(longest, text_width(c["name"].get<std::string>()));
    }
    const std::vector<int64_t> steps(step_set.begin(), step_set.end());
    const double cw = std::clamp(720.0 / std::max<size_t>(steps.size(), 1), 8.0, 36.0), ch = 16;
    const double label = std::clamp(static_cast<double>(longest) * 6.6 + 10, 80.0, 340.0);
    const size_t max_chars = static_cast<size_t>((label - 10) / 6.6);
    const double W = label + cw * steps.size() + 10, H = 30 + ch * changes.size();
    std::string s = fmt::format(
        "<svg class=\"chart changes\" width=\"{:.0f}\" height=\"{:.0f}\" viewBox=\"0 0 {:.0f} "
        "{:.0f}\" role=\"img\" aria-label=\"relative change per array and step\">",
        W, H, W, H);
    const size_t every = std::max<size_t>(1, static_cast<size_t>(std::ceil(48 / cw)));
    for (size_t k = 0; k < steps.size(); k += every)
        s += fmt::format("<text x=\"{:.1f}\" y=\"20\" text-anchor=\"middle\">{}</text>", label + cw * (k + 0.5),
                         steps[k]);
    for (size_t r = 0; r < changes.size(); ++r) {
        const Json& c = changes[r];
        const std::string name = c["name"];
        const std::string shown = shorten(name, max_chars, "\u2026", true);
        const double y = 26 + ch * r;
        s += fmt::format("<text class=\"row\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\"><title>{}</title>{}</text>",
                         label - 6, y + ch - 4, esc(name), esc(shown));
        for (size_t k = 0; k < c["steps"].size(); ++k) {
            const int64_t step = c["steps"][k];
            const size_t col = static_cast<size_t>(std::lower_bound(steps.begin(), steps.end(), step) - steps.begin());
            const auto v = value_of(c["relative_change"][k]);
            const double x = label + cw * col;
            if (!v) {
                s += fmt::format(
                    "<rect class=\"empty\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\">"
                    "<title>{} at step {}: its dtype or shape changed</title></rect>",
                    x + 0.5, y + 0.5, cw - 1, ch - 1, esc(name), step);
                continue;
            }
            // infinite: the array was all zeros before (a relative change without a scale), drawn as the largest
            const std::string cls = std::isnan(*v) ? "cell nonfinite" : *v == 0 ? "cell frozen" : "cell";
            const std::string fill = !std::isnan(*v) && *v != 0 ? " fill=\"" + change_colour(*v) + "\"" : "";
            s += fmt::format(
                "<rect class=\"{}\"{} data-value=\"{}\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" "
                "height=\"{:.1f}\"><title>{} at step {}: relative change {}</title></rect>",
                cls, fill, num(*v), x, y, cw - 1, ch - 1, esc(name), step,
                std::isnan(*v)   ? "not finite (NaN or Inf in the array)"
                : std::isinf(*v) ? "from all zeros"
                                 : num(*v));
        }
    }
    return s + "</svg>";
}

std::string change_legend() {
    std::string s = "<div class=\"legend\"><span>relative change:</span>";
    for (double v : {1e-6, 1e-4, 1e-2, 1.0})
        s += fmt::format("<span><span class=\"swatch\" style=\"background:{}\"></span>{}</span>", change_colour(v),
                         v == 1e-6  ? "\u2264 1e-6"
                         : v == 1.0 ? "\u2265 1"
                                    : num(v));
    return s +
           "<span><span class=\"swatch\" style=\"background:var(--frozen)\"></span>0 (unchanged)</span>"
           "<span><span class=\"swatch\" style=\"background:var(--bad)\"></span>NaN or Inf</span></div>";
}

// 64 bars, their heights the counts on a log scale (log(1 + count)), hover: the bin and its count.
std::string histogram_svg(const Json& h, const std::string& name) {
    if (!h.is_object()) return "<span class=\"note\">-</span>";
    constexpr double W = 192, H = 36, bw = 3;
    uint64_t top = 0;
    for (const Json& c : h["counts"]) top = std::max<uint64_t>(top, c.get<uint64_t>());
    std::string s = fmt::format(
        "<svg class=\"chart histogram\" data-name=\"{}\" width=\"{}\" height=\"{}\" "
        "viewBox=\"0 0 {} {}\" role=\"img\" aria-label=\"histogram of {}\">",
        esc(name), W, H, W, H, esc(name));
    s += fmt::format("<line class=\"axis\" x1=\"0\" x2=\"{}\" y1=\"{}\" y2=\"{}\"/>", W, H - 0.5, H - 0.5);
    const double scale = top == 0 ? 0 : (H - 2) / std::log1p(static_cast<double>(top));
    for (size_t k = 0; k < h["counts"].size(); ++k) {
        const uint64_t c = h["counts"][k];
        const double height = std::log1p(static_cast<double>(c)) * scale;
        const double lo = value_of(h["edges"][k]).value_or(0), hi = value_of(h["edges"][k + 1]).value_or(0);
        s += fmt::format(
            "<rect class=\"bar\" x=\"{:.1f}\" y=\"{:.2f}\" width=\"{}\" height=\"{:.2f}\"><title>[{}, {}{}: "
            "{}</title></rect>",
            k * bw, H - 1 - height, bw - 0.4, std::max(height, c > 0 ? 1.0 : 0.0), num(lo), num(hi),
            k + 1 == h["counts"].size() ? "]" : ")", c);
    }
    return s + "</svg>";
}

// Two files: per array the relative L2 difference as a bar on a log scale from 1e-12 to 1.
std::string difference_chart(const Json& differences) {
    std::vector<const Json*> rows;
    for (const Json& d : differences) rows.push_back(&d);
    std::stable_sort(rows.begin(), rows.end(), [](const Json* a, const Json* b) {
        const double x = value_of((*a)["relative_l2"]).value_or(-1), y = value_of((*b)["relative_l2"]).value_or(-1);
        return (std::isnan(x) ? HUGE_VAL : x) > (std::isnan(y) ? HUGE_VAL : y);
    });
    size_t longest = 0;
    for (const Json* d : rows) longest = std::max(longest, text_width((*d)["name"].get<std::string>()));
    const double label = std::clamp(static_cast<double>(longest) * 6.6 + 10, 80.0, 340.0), bar = 420, rh = 16;
    const double W = label + bar + 150, H = 8 + rh * rows.size();
    std::string s = fmt::format(
        "<svg class=\"chart differences\" width=\"{:.0f}\" height=\"{:.0f}\" viewBox=\"0 0 "
        "{:.0f} {:.0f}\" role=\"img\" aria-label=\"relative L2 difference per array\">",
        W, H, W, H);
    for (size_t r = 0; r < rows.size(); ++r) {
        const Json& d = *rows[r];
        const std::string name = d["name"];
        const double y = 4 + rh * r;
        s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>", label - 6, y + rh - 4,
                         esc(name));
        const auto rel = value_of(d["relative_l2"]);
        const auto max_abs = value_of(d["max_abs"]);
        std::string what;
        double width = 0;
        std::string cls = "bar";
        if (!rel) {
            what = "dtype or shape differs";
        } else if (std::isnan(*rel) || std::isinf(*rel)) {
            what = "not finite (NaN or Inf)";
            width = bar;
            cls = "nonfinite";
        } else if (*rel == 0) {
            what = "identical";
        } else {
            width = std::clamp((std::log10(*rel) + 12) / 12, 0.01, 1.0) * bar;
            what = fmt::format("{} (max |diff| {})", num(*rel), max_abs ? num(*max_abs) : "-");
        }
        s += fmt::format(
            "<rect class=\"{}\" data-value=\"{}\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" "
            "height=\"{}\"><title>{}: relative L2 difference {}</title></rect>",
            cls, rel ? num(*rel) : "", label, y + 2, width, rh - 4, esc(name), esc(what));
        s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\">{}</text>", label + width + 6, y + rh - 4, esc(what));
    }
    return s + "</svg>";
}

const char* warning_label(const std::string& kind) {
    if (kind == "nan") return "NaN";
    if (kind == "inf") return "Inf";
    if (kind == "frozen") return "frozen";
    if (kind == "jump") return "jump";
    if (kind == "unreadable") return "unreadable";
    return "note";
}

std::string warnings_section(const Json& report) {
    std::string s = "<section id=\"warnings\"><h2>Warnings</h2>";
    const Json& warnings = report["warnings"];
    if (warnings.empty()) {
        s += "<p class=\"ok\">None: no NaN or Inf in any array";
        if (report["checkpoints"].size() > 1) s += ", no array frozen over the run, no norm that grew tenfold";
        return s + ".</p></section>";
    }
    s += "<ul class=\"warnings\">";
    for (const Json& w : warnings) {
        const std::string kind = w["kind"];
        s += fmt::format("<li class=\"{}\" data-kind=\"{}\" data-name=\"{}\" data-step=\"{}\"><b>{}</b>{}</li>",
                         esc(kind), esc(kind), w["name"].is_string() ? esc(w["name"].get<std::string>()) : "",
                         w["step"].dump(), warning_label(kind), esc(w["message"].get<std::string>()));
    }
    return s + "</ul></section>";
}

std::string metrics_section(const Json& report) {
    const Json& metrics = report["metrics"];
    if (metrics.empty() || report["checkpoints"].size() < 2) return "";
    std::string s =
        "<section id=\"metrics\"><h2>Metrics</h2><p class=\"note\">Every numeric metadata entry of the "
        "checkpoints, over their steps; the best checkpoint is ringed where the name says which way is "
        "better (loss, error: lower; accuracy, score: higher).</p><div class=\"charts\">";
    for (const Json& m : metrics) s += metric_chart(m);
    return s + "</div></section>";
}

std::string checkpoints_section(const Json& report) {
    const Json& checkpoints = report["checkpoints"];
    std::string s =
        "<section id=\"checkpoints\"><h2>Checkpoints</h2><div class=\"scroll\"><table><thead><tr>"
        "<th>step</th><th>file</th><th>size</th><th>shared blocks</th><th>metadata</th></tr></thead><tbody>";
    for (const Json& c : checkpoints) {
        std::string meta;
        for (const auto& [key, value] : c["metadata"].items()) {
            if (manager_key(key) || key.rfind("__", 0) == 0) continue;  // "__": records such as nested state's
            const std::string v = shorten(value.get<std::string>(), 40, "\u2026");
            meta += fmt::format("{}<code>{}={}</code>", meta.empty() ? "" : " ", esc(metric_name(key).value_or(key)),
                                esc(v));
        }
        s += fmt::format(
            "<tr><td class=\"n\">{}</td><td class=\"mono\" title=\"{}\">{}</td><td class=\"n\">{}</td>"
            "<td class=\"n\">{}</td><td>{}</td></tr>",
            c["step"].dump(), esc(c["path"]), esc(last_component(c["path"])),
            c["bytes"].is_number() ? human_size(c["bytes"].get<uint64_t>(), false) : "-",
            c["shared_bytes"].is_number() ? human_size(c["shared_bytes"].get<uint64_t>(), false) : "-", meta);
    }
    return s +
           "</tbody></table></div><p class=\"note\">Shared blocks: bytes of the file whose blocks the file system "
           "holds once for it and other files (incremental saves on XFS or btrfs); - where it cannot tell.</p>"
           "</section>";
}

std::string changes_section(const Json& report) {
    const Json& changes = report["changes"];
    if (changes.empty()) return "";
    return "<section id=\"changes\"><h2>Change between checkpoints</h2><p class=\"note\">Per array and step: "
           "\u2016x<sub>t</sub> \u2212 x<sub>t\u22121</sub>\u2016 / \u2016x<sub>t\u22121</sub>\u2016, the array's "
           "relative change from the checkpoint before. Frozen layers stay grey; layers that jump stand out "
           "dark.</p>" +
           change_legend() + "<div class=\"scroll\">" + change_map(changes) + "</div></section>";
}

std::string differences_section(const Json& report) {
    if (!report.contains("differences")) return "";
    std::string s = fmt::format(
        "<section id=\"differences\"><h2>Differences</h2><p class=\"note\">From <code>{}"
        "</code> to <code>{}</code>: per array the relative L2 difference \u2016b \u2212 "
        "a\u2016 / \u2016a\u2016 (log scale) and the largest absolute difference.</p>",
        esc(report["checkpoints"][0]["path"]), esc(report["checkpoints"][1]["path"]));
    if (report["differences"].empty())
        s += "<p class=\"note\">No array is in both files.</p>";
    else
        s += "<div class=\"scroll\">" + difference_chart(report["differences"]) + "</div>";
    for (const Json& only : report["only_in"]) {
        if (only["names"].empty()) continue;
        s += fmt::format("<p class=\"only-in\">Only in <code>{}</code>:", esc(only["path"]));
        for (const Json& n : only["names"]) s += " <code>" + esc(n) + "</code>";
        s += "</p>";
    }
    return s + "</section>";
}

std::string arrays_section(const Json& report) {
    const Json& newest = report["checkpoints"].back();
    std::string s = fmt::format(
        "<section id=\"arrays\"><h2>Arrays of {}</h2><p class=\"note\">min, max, mean and std (numpy's, ddof 0) of "
        "the finite elements; NaN and infinities are counted instead. Histograms: 64 bins from min to max, heights "
        "on a log scale; bfloat16 and float8 as their values.</p><div class=\"scroll\"><table><thead><tr><th>name"
        "</th><th>dtype</th><th>shape</th><th>size</th><th>min</th><th>max</th><th>mean</th><th>std</th>"
        "<th>NaN</th><th>\u00b1Inf</th><th>zeros</th><th>histogram</th></tr></thead><tbody>",
        report["checkpoints"].size() > 1 ? fmt::format("step {} (the newest)", newest["step"].dump())
                                         : "<code>" + esc(last_component(newest["path"])) + "</code>");
    for (const Json& a : report["arrays"]) {
        std::string shape = "(";
        for (size_t k = 0; k < a["shape"].size(); ++k) shape += (k ? ", " : "") + a["shape"][k].dump();
        shape += a["shape"].size() == 1 ? ",)" : ")";
        const auto count = [](const Json& j) { return j.is_number() ? j.dump() : std::string("-"); };
        const bool nan = a["nan"].is_number() && a["nan"].get<uint64_t>() > 0;
        const bool inf = a["inf"].is_number() && a["inf"].get<uint64_t>() > 0;
        std::string zeros = "-";
        if (a["zeros"].is_number() && a["elements"].get<uint64_t>() > 0)
            zeros = fmt::format("{:.1f}%", 100.0 * a["zeros"].get<double>() / a["elements"].get<double>());
        s += fmt::format(
            "<tr data-name=\"{}\"><td class=\"mono\">{}</td><td>{}</td><td class=\"mono\">{}</td><td class=\"n\">{}"
            "</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>"
            "<td class=\"n{}\">{}</td><td class=\"n{}\">{}</td><td class=\"n\">{}</td><td>{}</td></tr>",
            esc(a["name"]), esc(a["name"]), esc(a["dtype"]), shape, human_size(a["bytes"].get<uint64_t>(), false),
            stat_text(a["min"]), stat_text(a["max"]), stat_text(a["mean"]), stat_text(a["std"]), nan ? " bad" : "",
            count(a["nan"]), inf ? " bad" : "", count(a["inf"]), zeros, histogram_svg(a["histogram"], a["name"]));
    }
    return s + "</tbody></table></div></section>";
}

}  // namespace

std::string html_escape(const std::string& text) {
    std::string out;
    out.reserve(text.size());
    for (char c : text) {
        switch (c) {
            case '&': out += "&amp;"; break;
            case '<': out += "&lt;"; break;
            case '>': out += "&gt;"; break;
            case '"': out += "&quot;"; break;
            case '\'': out += "&#39;"; break;
            default: out += c;
        }
    }
    return out;
}

std::string report_page(const Json& report) {
    const Json& checkpoints = report["checkpoints"];
    const std::string what =
        report["kind"] == "run" ? report["paths"][0].get<std::string>() : last_component(checkpoints.back()["path"]);
    std::string summary;
    if (report["kind"] == "run")
        summary = fmt::format("{} checkpoint{}, steps {} to {}", checkpoints.size(), checkpoints.size() == 1 ? "" : "s",
                              checkpoints.front()["step"].dump(), checkpoints.back()["step"].dump());
    else
        summary = fmt::format("{} file{}", checkpoints.size(), checkpoints.size() == 1 ? "" : "s");
    std::string page =
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        "<meta name=\"color-scheme\" content=\"light dark\">";
    page += fmt::format("<title>ckpt report: {}</title><style>{}</style></head><body>", esc(what), kStyle);
    page += fmt::format(
        "<header><h1>ckpt report</h1><p class=\"sub\"><code>{}</code> \u00b7 {} \u00b7 ckpt {}</p>"
        "</header>",
        esc(what), esc(summary), ckpt_version_string());
    page += warnings_section(report);
    page += metrics_section(report);
    page += differences_section(report);
    page += changes_section(report);
    if (report["kind"] != "file") page += checkpoints_section(report);
    page += arrays_section(report);
    return page + "</body></html>\n";
}

}  // namespace ckpt_tool
