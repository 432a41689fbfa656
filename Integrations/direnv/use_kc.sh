# direnv's `use kc`: put this in ~/.config/direnv/direnvrc (or source it from there),
# then in a project's .envrc:
#   use kc com.example.db                  # every item of the service
#   use kc com.github token GH_TOKEN=token # TOKEN and GH_TOKEN from the item 'token'
# Each item becomes a variable named as 'kc exec --env' names it (upper case, every
# other character not a letter or digit '_', '_' before a leading digit), or the name
# before '='. A missing item stops the .envrc with an error. Without item names, kc
# exec --env first checks the service as it would for a command: an item that would
# become a variable that makes programs load or run other code (ld.preload, path,
# bash_env, ...) or two items of one name stop the .envrc, and an item's name is only
# ever a name (never VAR=ITEM). The values come from the kernel each time direnv
# loads the .envrc; none is written to disk. (The shell drops a value's trailing
# newlines; use 'kc exec --env' when they matter.)
use_kc() {
    local service=${1:?use kc SERVICE [ITEM | VAR=ITEM]...}
    shift
    local items=("$@") item variable value listing listed=false
    if [ ${#items[@]} -eq 0 ]; then
        # Items in a service someone shares with you, or that came from an import, are
        # not yours to trust: let kc exec --env refuse what it refuses for a command.
        kc exec --service "$service" --env -- true || return 1
        listing=$(kc ls -- "$service") || return 1
        mapfile -t items <<< "$listing"
        listed=true
    fi
    for item in "${items[@]}"; do
        if ! $listed && [[ $item == *=* ]]; then
            variable=${item%%=*}
            item=${item#*=}
        else
            variable=$(printf %s "$item" | LC_ALL=C tr '[:lower:]' '[:upper:]' | LC_ALL=C tr -c '[:alnum:]' '_')
            [[ $variable == [0-9]* ]] && variable=_$variable
        fi
        if ! value=$(kc get -q -- "$service" "$item"); then
            log_error "use kc: no item '$item' in service '$service'; store it with: kc set $service $item"
            return 1
        fi
        export "$variable=$value"
    done
}
