# SPDX-License-Identifier: LGPL-2.1-or-later
"""What the settings app says, in a person's words, ready for translation (gettext domain `netpermd-settings`)."""
import gettext
import os

from gi.repository import Adw

_ = gettext.translation("netpermd-settings", fallback=True).gettext

# The iOS three-way choice for cellular, and what each asks of Wi-Fi and cellular (wifi, wwan).
CHOICES = [
    ("off", lambda: _("Off"), ("deny", "deny")),
    ("wifi", lambda: _("Wi-Fi only"), ("allow", "deny")),
    ("both", lambda: _("Wi-Fi & Cellular"), ("allow", "allow")),
]


def _messages_locale():
    """The person's locale for messages, as setlocale(LC_MESSAGES, "") takes it: LC_ALL, LC_MESSAGES, LANG."""
    for key in ("LC_ALL", "LC_MESSAGES", "LANG"):
        if os.environ.get(key):
            return os.environ[key]
    return None


def app_name(entry, locale=None):
    """The app's name in the person's language: the daemon's `names` (its desktop file's Name[LOCALE]=) matched
    as the Desktop Entry spec matches a locale (lang_COUNTRY@MODIFIER, lang_COUNTRY, lang@MODIFIER, lang), else
    `name`, else None."""
    names = entry.get("names") or {}
    loc = locale if locale is not None else _messages_locale()
    if names and loc and loc.split(".")[0] not in ("C", "POSIX"):
        lang, _sep, modifier = loc.partition("@")
        lang = lang.split(".")[0]
        base, _sep, country = lang.partition("_")
        tries = []
        if country and modifier:
            tries.append(f"{base}_{country}@{modifier}")
        if country:
            tries.append(f"{base}_{country}")
        if modifier:
            tries.append(f"{base}@{modifier}")
        tries.append(base)
        for t in tries:
            if t in names:
                return names[t]
    return entry.get("name")


def choice_of(verdict):
    """The choice a verdict's permissions show: an undecided ask counts as not allowed."""
    p = verdict.get("permissions", {})
    wifi, wwan = p.get("wifi") == "allow", p.get("wwan") == "allow"
    if not wifi:
        return "off"
    return "both" if wwan else "wifi"


def fixed(verdict, kind):
    """The policy itself says allow or deny for `kind`: no one's decision changes it here."""
    return verdict.get("sources", {}).get(kind) == "policy" and verdict.get("permissions", {}).get(kind) in ("allow", "deny")


def why(verdict):
    """Why it cannot connect now, or that it can: the daemon's own sentence (one explanation for every face)."""
    if verdict.get("available"):
        link = (verdict.get("via") or {}).get("name")
        return _("Connected by {link}").format(link=link) if link else _("May use the network")
    return verdict.get("message") or _("Cannot use the network now")


def size(n):
    """Bytes as a person reads them: 1.2 MB."""
    n = float(n or 0)
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return (f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}")
        n /= 1000
    return f"{n:.1f} TB"


KIND_NAMES = {"wifi": lambda: _("Wi-Fi"), "wwan": lambda: _("Cellular"), "ethernet": lambda: _("Ethernet"),
              "other": lambda: _("Other"), "metered": lambda: _("Metered"), "roaming": lambda: _("Roaming")}


def kind_name(kind, metered=False, roaming=False):
    name = KIND_NAMES.get(kind, lambda: kind)()
    if metered and kind not in ("metered", "roaming"):
        name = _("{kind}, metered").format(kind=name)
    if roaming and kind not in ("metered", "roaming"):
        name = _("{kind}, roaming").format(kind=name)
    return name


def plain_row(title, subtitle=None):
    """An Adw.ActionRow whose title and subtitle are text, never markup ("Wi-Fi & Cellular", an app's own name)."""
    row = Adw.ActionRow()
    row.set_use_markup(False)
    row.set_title(title)
    if subtitle is not None:
        row.set_subtitle(subtitle)
    return row
