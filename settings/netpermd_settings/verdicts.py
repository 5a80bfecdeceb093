# SPDX-License-Identifier: LGPL-2.1-or-later
"""What a verdict means to a person, computed from its fields, never guessed: which of the choices it is, what a
choice asks of each kind of link, and why the app cannot connect now. Pure (no GTK), so the tests read it alone.

The choices (docs/SETTINGS.md): "Wi-Fi & Cellular" allows every kind; "Wi-Fi only" denies cellular alone (as iOS's
"WLAN only": Wi-Fi, wired and other links stay allowed); "Off" denies every kind, Ethernet and other included. An app undecided on a kind "Asks"; one whose kinds no choice of the person can change is "Set by
your administrator"; any other mix (decided elsewhere kind by kind) is "Some networks"."""

KINDS = ("wifi", "wwan", "ethernet", "other")

# What each choice asks of each kind.
CHOICES = {
    "all": {"wifi": "allow", "wwan": "allow", "ethernet": "allow", "other": "allow"},
    "wifi": {"wifi": "allow", "wwan": "deny", "ethernet": "allow", "other": "allow"},
    "off": {"wifi": "deny", "wwan": "deny", "ethernet": "deny", "other": "deny"},
}
# In the order the page shows them.
CHOICE_ORDER = ("all", "wifi", "off")
# Decided for everyone: a user's own decision cannot change it (docs/PROTOCOL.md, DECIDE).
EVERYONES = ("decision", "once")


def fixed(verdict, kind, privileged=False):
    """The person cannot change `kind` here: the policy says allow or deny, or (for a user) an administrator decided
    it for everyone, or a budget closes metered links."""
    p = verdict.get("permissions", {}).get(kind)
    source = verdict.get("sources", {}).get(kind)
    if source == "policy":
        return p in ("allow", "deny")
    if source == "budget":
        return True
    return not privileged and source in EVERYONES


def undecided(verdict, kind):
    """The policy says ask and nobody has answered (with an agent: `ask`; without one: denied by `no-agent`)."""
    return verdict.get("permissions", {}).get(kind) == "ask" or verdict.get("sources", {}).get(kind) == "no-agent"


def matching(verdict):
    """The choice the four kinds' permissions are, or None."""
    p = verdict.get("permissions", {})
    for key in CHOICE_ORDER:
        if all(p.get(k) == CHOICES[key][k] for k in KINDS):
            return key
    return None


def choice_of(verdict, privileged=False):
    """One of all, wifi, off, asks, admin, some."""
    if any(undecided(verdict, k) for k in KINDS):
        return "asks"
    if all(fixed(verdict, k, privileged) for k in KINDS):
        return "admin"
    return matching(verdict) or "some"


def can_choose(verdict, key, privileged=False):
    """Whether choice `key` can be made: no kind it changes is fixed to something else."""
    p = verdict.get("permissions", {})
    return all(not fixed(verdict, k, privileged) or p.get(k) == want for k, want in CHOICES[key].items())


def decisions_for(verdict, key, privileged=False):
    """The DECIDEs choice `key` needs: {kind: allow?} for each kind not fixed whose permission differs."""
    p = verdict.get("permissions", {})
    return {k: want == "allow" for k, want in CHOICES[key].items()
            if not fixed(verdict, k, privileged) and p.get(k) != want}


def decisions_for_everyone(verdict, key):
    """The DECIDEs choice `key` needs for everyone: each kind the policy or a budget does not fix, whatever the
    person's own permission is (their own decisions say nothing of everyone's)."""
    return {k: want == "allow" for k, want in CHOICES[key].items() if not fixed(verdict, k, privileged=True)}


def why_facts(verdict):
    """Why it cannot connect now, as facts the words are made from: (what, kinds) where `what` is one of ok,
    no-network, denied, asks, routed, blocked, no-route, budget, starting, unknown and `kinds` the kinds or settings
    concerned (a via link's kind for ok)."""
    reason = verdict.get("reason")
    if verdict.get("available") or reason == "ok":
        return "ok", [((verdict.get("via") or {}).get("kind"))]
    if reason == "no-network":
        return "no-network", []
    if reason == "denied":
        return "denied", list(verdict.get("denied_kinds", []))
    if reason == "awaiting-decision":
        return "asks", list(verdict.get("pending_kinds", []))
    if reason == "budget-exhausted":
        return "budget", []
    if reason == "starting":
        return "starting", []
    if reason == "routed-elsewhere":
        egress = [e for e in (verdict.get("egress") or {}).values() if e]
        if any("blocked" in e for e in egress):
            return "blocked", []
        if not egress:
            return "no-route", []
        return "routed", [e.get("kind") for e in egress if e.get("kind") and not e.get("allowed", True)]
    return "unknown", []
