// terminal_safe: what text from a trace may print on a terminal
// (RELIABILITY.md 31).
#include <boost/test/unit_test.hpp>

#include <string>

#include "stallscope/file_summary.hpp"

using stallscope::reader::terminal_safe;

BOOST_AUTO_TEST_SUITE(terminal_text)

BOOST_AUTO_TEST_CASE(escapes_control_characters_but_keeps_newline_and_tab) {
  BOOST_TEST(terminal_safe("a\tb\nc") == "a\tb\nc");
  BOOST_TEST(terminal_safe("\x1b]0;PWNED\a\x1b[2J") == "\\x1b]0;PWNED\\x07\\x1b[2J");
  BOOST_TEST(terminal_safe(std::string("nul\0del\x7f", 8)) == "nul\\x00del\\x7f");
  BOOST_TEST(terminal_safe("\r") == "\\x0d");
}

BOOST_AUTO_TEST_CASE(keeps_utf8_and_escapes_what_is_not) {
  BOOST_TEST(terminal_safe("caf\xc3\xa9 \xe6\x97\xa5 \xf0\x9f\x98\x80") ==
             "caf\xc3\xa9 \xe6\x97\xa5 \xf0\x9f\x98\x80");
  BOOST_TEST(terminal_safe("\xff") == "\\xff");
  BOOST_TEST(terminal_safe("\xc3\x28") == "\\xc3(");           // a lead byte alone
  BOOST_TEST(terminal_safe("\xc2\x9b" "2J") == "\\xc2\\x9b2J");  // C1 CSI
  BOOST_TEST(terminal_safe("\xe0\x80\xaf") == "\\xe0\\x80\\xaf");  // overlong
  BOOST_TEST(terminal_safe("\xed\xa0\x80") == "\\xed\\xa0\\x80");  // a surrogate
  BOOST_TEST(terminal_safe("\xe6\x97") == "\\xe6\\x97");           // cut short
}

BOOST_AUTO_TEST_CASE(keeps_colour_sequences_only_when_asked) {
  BOOST_TEST(terminal_safe("\x1b[1mbold\x1b[0m", true) == "\x1b[1mbold\x1b[0m");
  BOOST_TEST(terminal_safe("\x1b[1mbold", false) == "\\x1b[1mbold");
  BOOST_TEST(terminal_safe("\x1b[2J\x1b]0;t\a", true) == "\\x1b[2J\\x1b]0;t\\x07");
}

BOOST_AUTO_TEST_SUITE_END()
