// The dashboard's page embedded at build time (gossip/web.hpp): served by path, with the DOM
// hooks the browser tests (tests/python/test_observe.py, test_dashboard_page.py) rely on.
#include <catch2/catch.hpp>

#include <string>

#include "gossip/web.hpp"

TEST_CASE("the dashboard's files are embedded and served by path", "[web]") {
  const auto index = gossip::web_asset("/");
  REQUIRE(index);
  CHECK(index->content_type == "text/html; charset=utf-8");
  const std::string html(index->body);
  CHECK(html.find("app.js") != std::string::npos);
  CHECK(html.find("style.css") != std::string::npos);
  CHECK(html.find("id=\"graph\"") != std::string::npos);
  const auto js = gossip::web_asset("/app.js");
  REQUIRE(js);
  CHECK(js->content_type == "text/javascript; charset=utf-8");
  CHECK(std::string(js->body).find("state.json") != std::string::npos);
  REQUIRE(gossip::web_asset("/style.css"));
  CHECK(gossip::web_asset("/index.html")->body == index->body);
  CHECK_FALSE(gossip::web_asset("/../meson.build"));
  CHECK_FALSE(gossip::web_asset("/favicon.ico"));
}
