# SPDX-License-Identifier: LGPL-2.1-or-later
# bash completion for netpermctl(1)                                      -*- shell-script -*-
# Installed as $(PREFIX)/share/bash-completion/completions/netpermctl. Self-contained: it needs nothing from
# the bash-completion package, but uses its _command_offset for `wait -- COMMAND ARGS` when present.

_netpermctl_commands="status links query apps reload check monitor wait run prompts decide forget decisions agent scopes metrics usage report ping help"
_netpermctl_options="--socket -j --json -t --terse -h --help --version"
_netpermctl_kinds="wifi wwan ethernet other metered"

# The app ids of the policy, from the first field of `netpermctl --terse apps`. Quick and quiet: nothing at
# all when the daemon is not running, the caller may not list apps, or it takes more than a second.
_netpermctl_apps()
{
    local prog=$1 socket=$2 line
    local -a cmd=("$prog")
    [[ -n $socket ]] && cmd+=(--socket "$socket")
    cmd+=(--terse apps)
    if type -P timeout >/dev/null 2>&1; then
        cmd=(timeout 1 "${cmd[@]}")
    fi
    "${cmd[@]}" </dev/null 2>/dev/null | while IFS= read -r line; do
        # App ids are letters, digits, '.', '-' and '_': the first ':' ends the field.
        [[ -n $line ]] && printf '%s\n' "${line%%:*}"
    done
}

_netpermctl_links()
{
    local d
    for d in /sys/class/net/*; do
        [[ -e $d ]] && printf '%s\n' "${d##*/}"
    done
}

_netpermctl()
{
    local cur=${COMP_WORDS[COMP_CWORD]}
    local prev=
    ((COMP_CWORD > 0)) && prev=${COMP_WORDS[COMP_CWORD - 1]}
    COMPREPLY=()

    # What the words before the cursor say: the command, its arguments, --socket, and where `--` is.
    local i w cmd= socket= dashdash= once=
    local -a args=()
    for ((i = 1; i < COMP_CWORD; i++)); do
        w=${COMP_WORDS[i]}
        case $w in
            --)
                if [[ $cmd == wait || $cmd == run ]]; then
                    dashdash=$i
                    break
                fi
                ;;
            --socket)
                ((i++))
                socket=${COMP_WORDS[i]}
                ;;
            --app | --timeout | --output) ((i++)) ;;
            --once) once=1 ;;
            -*) ;;
            *)
                if [[ -z $cmd ]]; then cmd=$w; else args+=("$w"); fi
                ;;
        esac
    done

    # wait [...] -- COMMAND ARGS: complete the command, then its own arguments.
    if [[ -n $dashdash ]]; then
        if ((COMP_CWORD == dashdash + 1)); then
            mapfile -t COMPREPLY < <(compgen -c -- "$cur" | sort -u)
        elif declare -F _command_offset >/dev/null; then
            _command_offset $((dashdash + 1))
        else
            compopt -o filenames 2>/dev/null
            mapfile -t COMPREPLY < <(compgen -f -- "$cur")
        fi
        return 0
    fi

    local prog=${COMP_WORDS[0]}
    type -P -- "$prog" >/dev/null 2>&1 || prog=netpermctl

    case $prev in
        --socket | --output)
            compopt -o filenames 2>/dev/null
            mapfile -t COMPREPLY < <(compgen -f -- "$cur")
            return 0
            ;;
        --app)
            mapfile -t COMPREPLY < <(compgen -W "$(_netpermctl_apps "$prog" "$socket")" -- "$cur")
            return 0
            ;;
        --timeout)
            return 0
            ;;
    esac

    local n=${#args[@]}
    if [[ $cur == -* ]]; then
        local opts=$_netpermctl_options
        case $cmd in
            wait) opts+=" --app --timeout --" ;;
            run) opts+=" --app --" ;;
            metrics) opts+=" --output" ;;
            decide) ((n >= 3)) && [[ -z $once ]] && opts+=" --once" ;;
            agent) opts+=" --notify" ;;
        esac
        mapfile -t COMPREPLY < <(compgen -W "$opts" -- "$cur")
        return 0
    fi

    if [[ -z $cmd ]]; then
        mapfile -t COMPREPLY < <(compgen -W "$_netpermctl_commands" -- "$cur")
        return 0
    fi

    local words=
    case $cmd:$n in
        help:0) words=$_netpermctl_commands ;;
        links:0) words=$(_netpermctl_links) ;;
        query:0 | monitor:0 | decide:0 | forget:0) words=$(_netpermctl_apps "$prog" "$socket") ;;
        decide:1 | forget:1) words=$_netpermctl_kinds ;;
        usage:0) words="reset $(_netpermctl_apps "$prog" "$socket")" ;;
        usage:1) [[ ${args[0]} == reset ]] && words=$(_netpermctl_apps "$prog" "$socket") ;;
        report:0) words="clear on off $(_netpermctl_apps "$prog" "$socket")" ;;
        report:1) [[ ${args[0]} == clear ]] && words=$(_netpermctl_apps "$prog" "$socket") ;;
        decide:2) words="allow deny" ;;
        decide:3) [[ -z $once ]] && words="--once" ;;
        wait:*) words="--app --timeout --" ;;
        agent:0) words="--notify" ;;
        check:0)
            compopt -o filenames 2>/dev/null
            mapfile -t COMPREPLY < <(compgen -f -- "$cur")
            return 0
            ;;
    esac
    [[ -n $words ]] && mapfile -t COMPREPLY < <(compgen -W "$words" -- "$cur")
    return 0
}

complete -F _netpermctl netpermctl
