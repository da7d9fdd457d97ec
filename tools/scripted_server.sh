# Sourced by the tools/device_*.sh scripts: starts tests/llm_server.py on
# loopback for LIFE seconds with its output in DIR/server.out, and sets
# SERVER (its pid) and PORT; base SCENARIO prints that scenario's base URL.
# Usage: . tools/scripted_server.sh; start_scripted_server DIR LIFE || exit 1
start_scripted_server() {
	python3 tests/llm_server.py --max-life "$2" >"$1/server.out" &
	SERVER=$!
	_i=0
	while ! grep -q '^PORT' "$1/server.out" 2>/dev/null; do
		_i=$((_i + 1))
		[ $_i -gt 50 ] && { echo "the scripted server did not start"; return 1; }
		sleep 0.1
	done
	PORT=$(sed -n 's/^PORT //p' "$1/server.out")
}
base() { echo "http://127.0.0.1:$PORT/s/$1/v1"; }
