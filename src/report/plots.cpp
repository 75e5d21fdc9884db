// report/plots.cpp: gnuplot, driven from one place. A plot is described by its axes and series;
// this writes the script (PNG and SVG of every plot), runs gnuplot and says why when it cannot.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "gossip/core.hpp"
#include "gossip/report.hpp"

namespace gossip {

namespace {

std::string gnuplot_quote(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    o += c;
  }
  return o + "\"";
}

/// A series title: quoted, with `_` and `^` shown as themselves (gnuplot's enhanced text would
/// make "top_k" a subscript).
std::string gnuplot_label(const std::string& s) {
  std::string plain;
  for (char c : s) {
    if (c == '_' || c == '^') plain += '\\';
    plain += c;
  }
  return gnuplot_quote(plain);
}

const char* const kPalette[kPlotColours] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd",
                                             "#ff7f0e", "#17becf", "#8c564b", "#e377c2"};

std::string column(int c) { return cat("$", c); }

/// The x expression: divided when asked, non-positive values left out on a log axis.
std::string x_expression(const PlotSeries& s, bool log_x) {
  const std::string x = s.x_divisor == 1.0 ? column(s.x_column)
                                           : cat(column(s.x_column), "/", s.x_divisor);
  return log_x ? cat("(", column(s.x_column), " > 0 ? ", x, " : NaN)") : cat("(", x, ")");
}

/// A y value on the plot's axis: on a log axis, values at or below the floor are drawn at the
/// floor (zeros at the bottom, not dropped), or left out when there is no floor.
std::string y_clamped(const std::string& value, const Plot& p) {
  if (!p.log_y) return cat("(", value, ")");
  if (p.y_floor > 0)
    return cat("((", value, ") > ", p.y_floor, " ? (", value, ") : ", p.y_floor, ")");
  return cat("((", value, ") > 0 ? (", value, ") : NaN)");
}

std::string source(const PlotSeries& s) {
  return cat("'", s.data_file, "'", s.index >= 0 ? cat(" index ", s.index) : std::string());
}

/// The band (when the series has a spread column) and the line of series number `k` of a panel.
std::vector<std::string> series_clauses(const PlotSeries& s, int k, const Plot& p) {
  const std::string colour = kPalette[(s.colour >= 0 ? s.colour : k) % kPlotColours];
  const int dash = s.dashed ? 2 : s.colour >= 0 ? 1 : k / kPlotColours + 1;
  const std::string x = x_expression(s, p.log_x);
  std::vector<std::string> out;
  if (s.spread_column > 0) {
    const std::string y = column(s.y_column), d = column(s.spread_column);
    out.push_back(cat(source(s), " using ", x, ":", y_clamped(cat(y, "-", d), p), ":",
                      y_clamped(cat(y, "+", d), p),
                      " with filledcurves fs transparent solid 0.18 noborder lc rgb '", colour,
                      "' notitle"));
  }
  out.push_back(cat(source(s), " using ", x, ":", y_clamped(column(s.y_column), p),
                    s.x_tic_column > 0 ? cat(":xtic(", s.x_tic_column, ")") : std::string(),
                    s.points ? " with linespoints pt 7 ps 0.8" : " with lines", " lw 2 dt ",
                    dash, " lc rgb '", colour, "' title ", gnuplot_label(s.label)));
  return out;
}

void write_panel(std::ostream& gp, const Plot& p, const PlotPanel& panel) {
  gp << (panel.title.empty() ? "unset title\n" : cat("set title ", gnuplot_quote(panel.title), "\n"))
     << "set xlabel " << gnuplot_quote(p.x_label) << "\nset ylabel " << gnuplot_quote(p.y_label)
     << "\n"
     << (p.log_x ? "set logscale x\nset format x '%g'\n" : "unset logscale x\nset format x '%g'\n")
     // Categories (rotated tic labels) are kept off the edges of the panel.
     << (p.rotate_x_tics ? "set xtics rotate by -30 noenhanced\nset offsets 0.3, 0.3, 0, 0\n"
                         : "set xtics norotate enhanced\nset offsets 0, 0, 0, 0\n")
     << (p.log_y ? "set logscale y\nset format y '%.0e'\n" : "unset logscale y\nset format y '%g'\n")
     << (p.log_y && p.y_floor > 0 ? cat("set yrange [", p.y_floor, ":*]\n")
                                  : std::string("set yrange [*:*]\n"));
  std::vector<std::string> clauses;
  // Bands first, so every line is drawn over every band.
  for (int pass = 0; pass < 2; ++pass)
    for (std::size_t k = 0; k < panel.series.size(); ++k) {
      auto c = series_clauses(panel.series[k], static_cast<int>(k), p);
      if (pass == 0 && c.size() == 2) clauses.push_back(c[0]);
      if (pass == 1) clauses.push_back(c.back());
    }
  gp << "plot ";
  for (std::size_t i = 0; i < clauses.size(); ++i) gp << (i ? ", \\\n     " : "") << clauses[i];
  gp << "\n";
}

void write_script(const std::string& path, const std::vector<Plot>& plots) {
  std::ofstream gp(path, std::ios::trunc);
  if (!gp) throw InputError(cat(path, ": cannot open for writing"));
  gp << "# Drawn by gossip; rerun with: gnuplot plots.gp (from this directory)\n"
     << "set key outside right top font ',9' samplen 2\nset grid\n";
  for (const bool svg : {false, true}) {
    for (const Plot& p : plots) {
      std::vector<PlotPanel> panels = p.panels;
      if (panels.empty()) panels.push_back(PlotPanel{"", p.series});
      const int columns = std::max(1, std::min<int>(p.columns, static_cast<int>(panels.size())));
      const int rows = static_cast<int>((panels.size() + columns - 1) / columns);
      const bool multi = panels.size() > 1;
      const int width = multi ? 620 * columns : 900;
      const int height = multi ? 400 * rows + (p.title.empty() ? 0 : 40) : 540;
      gp << "set terminal " << (svg ? "svg" : "pngcairo") << " size " << width << "," << height
         << "\nset output '" << p.name << (svg ? ".svg" : ".png") << "'\n";
      if (multi) {
        gp << "set multiplot layout " << rows << "," << columns
           << (p.title.empty() ? std::string() : cat(" title ", gnuplot_quote(p.title)))
           << "\n";
        for (const PlotPanel& panel : panels) write_panel(gp, p, panel);
        gp << "unset multiplot\n";
      } else {
        PlotPanel only = panels.front();
        if (only.title.empty()) only.title = p.title;
        write_panel(gp, p, only);
      }
    }
  }
  if (!gp) throw RuntimeError(cat(path, ": write failed"));
}

/// gnuplot's warnings from its log (a canvas too small, an empty range), at most a few.
void print_warnings(const std::string& log_path) {
  std::ifstream log(log_path);
  std::string line;
  int shown = 0;
  while (std::getline(log, line) && shown < 5) {
    std::string lower = line;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (lower.find("warning") == std::string::npos) continue;
    std::fprintf(stderr, "gnuplot: %s (%s)\n", line.c_str(), log_path.c_str());
    ++shown;
  }
}

}  // namespace

bool draw_plots(const std::string& dir, const std::vector<Plot>& plots, std::string* why) {
  write_script(dir + "/plots.gp", plots);
  if (std::system("command -v gnuplot > /dev/null 2>&1") != 0) {
    if (why) *why = "gnuplot is not installed (scripts/setup.sh installs it); plots.gp is written";
    return false;
  }
  const std::string command = cat("cd '", dir, "' && gnuplot plots.gp > plots.log 2>&1");
  if (std::system(command.c_str()) != 0) {
    if (why) *why = cat("gnuplot failed; see ", dir, "/plots.log");
    print_warnings(dir + "/plots.log");
    return false;
  }
  print_warnings(dir + "/plots.log");
  return true;
}

}  // namespace gossip
