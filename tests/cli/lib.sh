# lib.sh: sourced by the traceprof command's test scripts: a work directory
# removed at exit, fail and ok, PostgreSQL notices kept quiet, and
# fresh_cli_db.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { echo "ok: $*"; }
export PGOPTIONS='-c client_min_messages=warning'
# fresh_cli_db TRACEPROF_DB CLUSTER NAME: database NAME of the test cluster,
# made anew and migrated; its conninfo on stdout
fresh_cli_db() {
	local base conn
	base=$("$1" conninfo "$2" --dbname postgres)
	psql "$base" -qX -v ON_ERROR_STOP=1 -c "DROP DATABASE IF EXISTS $3" \
		-c "CREATE DATABASE $3" >/dev/null
	conn=$("$1" conninfo "$2" --dbname "$3")
	"$1" migrate --db "$conn" >/dev/null
	echo "$conn"
}
