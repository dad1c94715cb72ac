# Shared by the browser tests: `fail MESSAGE` and `require_browser_tools SOURCE_DIR`, which fails (never skips)
# when Chromium, node or web/node_modules is missing. Source it after setting `test_name`.
fail() { echo "$test_name: FAIL: $*" >&2; exit 1; }

require_browser_tools() {
  [ -x /usr/bin/chromium ] || fail "/usr/bin/chromium is missing: run scripts/setup"
  [ -f "$1/web/node_modules/playwright-core/package.json" ] || fail "web/node_modules is missing: run scripts/setup"
  [ -f "$1/web/node_modules/vega/build/vega.min.js" ] || fail "web/node_modules/vega is missing: run scripts/setup"
  command -v node >/dev/null || fail "node is missing: run scripts/setup"
}
