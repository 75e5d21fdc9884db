// report/plots.cpp: gnuplot, driven from one place. A plot is described by its axes and series;
// this writes the script (PNG and SVG of every plot), runs gnuplot and says why when it cannot.
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

/// "'curves.dat' index 2 using ($4/1e+06):5 with lines lw 2 title \"ring\"".
std::string series_clause(const PlotSeries& s, bool log_y) {
  const std::string x =
      s.x_divisor == 1.0 ? cat(s.x_column) : cat("($", s.x_column, "/", s.x_divisor, ")");
  const std::string y =
      log_y ? cat("($", s.y_column, " > 0 ? $", s.y_column, " : NaN)") : cat(s.y_column);
  return cat("'", s.data_file, "'", s.index >= 0 ? cat(" index ", s.index) : std::string(),
             " using ", x, ":", y, " with lines lw 2 title ", gnuplot_quote(s.label));
}

void write_script(const std::string& path, const std::vector<Plot>& plots) {
  std::ofstream gp(path, std::ios::trunc);
  if (!gp) throw InputError(cat(path, ": cannot open for writing"));
  gp << "# Drawn by gossip; rerun with: gnuplot plots.gp (from this directory)\n"
     << "set key outside right\nset grid\n";
  for (const char* term : {"pngcairo size 900,540", "svg size 900,540"}) {
    const std::string ext = std::string(term).substr(0, 3) == "svg" ? "svg" : "png";
    for (const Plot& p : plots) {
      gp << "set terminal " << term << "\nset output '" << p.name << "." << ext << "'\n"
         << (p.title.empty() ? "unset title\n" : cat("set title ", gnuplot_quote(p.title), "\n"))
         << "set xlabel '" << p.x_label << "'\nset ylabel '" << p.y_label << "'\n"
         << (p.log_y ? "set logscale y\nset format y '%.0e'\n"
                     : "unset logscale y\nset format y '%g'\n");
      gp << "plot ";
      for (std::size_t i = 0; i < p.series.size(); ++i)
        gp << (i ? ", \\\n     " : "") << series_clause(p.series[i], p.log_y);
      gp << "\n";
    }
  }
  if (!gp) throw RuntimeError(cat(path, ": write failed"));
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
    return false;
  }
  return true;
}

}  // namespace gossip
