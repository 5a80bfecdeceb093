# SPDX-License-Identifier: LGPL-2.1-or-later
"""What the settings app says, in a person's words, ready for translation (gettext domain `netpermd-settings`)."""
import gettext
import locale
import os

from gi.repository import Adw, GLib

from .verdicts import why_facts

DOMAIN = "netpermd-settings"


def _localedir():
    """$NETPERMD_SETTINGS_LOCALEDIR, else PREFIX/share/locale beside the installed modules, else this checkout's
    compiled catalogues (`make settings-mo`), else the system's."""
    if os.environ.get("NETPERMD_SETTINGS_LOCALEDIR"):
        return os.environ["NETPERMD_SETTINGS_LOCALEDIR"]
    here = os.path.dirname(__file__)
    for d in (os.path.join(here, "..", "..", "locale"), os.path.join(here, "..", "..", ".build", "settings-locale")):
        if os.path.isdir(d):
            return d
    return None


LOCALEDIR = _localedir()
try:
    locale.setlocale(locale.LC_ALL, "")
except locale.Error:
    pass
# The .ui templates' strings are looked up by GTK (C gettext) in the same catalogue.
if hasattr(locale, "bindtextdomain"):
    locale.bindtextdomain(DOMAIN, LOCALEDIR or "/usr/share/locale")
_ = gettext.translation(DOMAIN, localedir=LOCALEDIR, fallback=True).gettext

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


CHOICE_WORDS = {"all": lambda: _("Wi-Fi & Cellular"), "wifi": lambda: _("Wi-Fi only"), "off": lambda: _("Off"),
                "asks": lambda: _("Asks"), "admin": lambda: _("Set by your administrator"),
                "some": lambda: _("Some networks")}


def choice_word(key):
    return CHOICE_WORDS[key]()


KIND_NAMES = {"wifi": lambda: _("Wi-Fi"), "wwan": lambda: _("Cellular"), "ethernet": lambda: _("Ethernet"),
              "other": lambda: _("Other networks"), "metered": lambda: _("Metered networks"),
              "roaming": lambda: _("Roaming"), None: lambda: _("the network")}


def kind_name(kind, metered=False, roaming=False):
    name = KIND_NAMES.get(kind, KIND_NAMES[None])()
    if metered and kind not in ("metered", "roaming"):
        name = _("{kind}, metered").format(kind=name)
    if roaming and kind not in ("metered", "roaming"):
        name = _("{kind}, roaming").format(kind=name)
    return name


def kinds_list(kinds):
    return _(", ").join(kind_name(k) for k in kinds)


def why(verdict):
    """Why it cannot connect now, or how it is connected, in the person's words (from the verdict's reason and
    fields, not the daemon's English sentence; link names are for the details row)."""
    what, kinds = why_facts(verdict)
    if what == "ok":
        return _("Connected by {kind}").format(kind=kind_name(kinds[0])) if kinds[0] else _("Connected")
    if what == "no-network":
        return _("No network")
    if what == "denied":
        return _("Not allowed on {kinds}").format(kinds=kinds_list(kinds))
    if what == "asks":
        return _("Waiting for your answer")
    if what == "budget":
        budget = verdict.get("budget") or {}
        return _("Used up its {size} this month").format(size=size(budget.get("limit", 0)))
    if what == "starting":
        return _("netpermd is starting")
    if what == "blocked":
        return _("The system blocks its traffic")
    if what == "no-route":
        return _("No route out")
    if what == "routed":
        return _("Its traffic goes by {kinds}, which it may not use").format(kinds=kinds_list(kinds))
    return _("Cannot use the network now")


def details(verdict):
    """The links behind `why`, by name: for the details row only."""
    via = (verdict.get("via") or {}).get("name")
    egress = [e.get("name") for e in (verdict.get("egress") or {}).values() if e and e.get("name")]
    names = [via] if via else sorted(set(egress))
    return ", ".join(names) if names else _("No link")


def size(n):
    """Bytes in IEC units, as USAGE.md reads `M` and `G` (1 MiB = 1,048,576 bytes): 512 B, 1.5 KiB, 1 MiB."""
    n = float(n or 0)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            if unit == "B":
                return _("{n} B").format(n=int(n))
            text = f"{n:.1f}".removesuffix(".0")
            return _("{n} {unit}").format(n=text, unit=unit)
        n /= 1024
    return ""


def day(iso, before=False):
    """A local day (`2026-12-01`) as the locale writes dates; `before`: the day before it (a period's `end` is the
    next period's first day)."""
    try:
        y, m, d = (int(x) for x in iso.split("-"))
        date = GLib.DateTime.new_local(y, m, d, 12, 0, 0)
    except (AttributeError, ValueError, TypeError):
        return iso or "?"
    if date is None:
        return iso
    if before:
        date = date.add_days(-1)
    return date.format("%x")


def when(epoch):
    """A time (seconds since the epoch) as the locale writes it: the hour and minute today, with the date before."""
    try:
        t = GLib.DateTime.new_from_unix_local(int(epoch))
    except (TypeError, ValueError, OverflowError):
        return "?"
    if t is None:
        return "?"
    now = GLib.DateTime.new_now_local()
    if (t.get_year(), t.get_day_of_year()) == (now.get_year(), now.get_day_of_year()):
        return t.format("%R")
    return t.format("%x %R")


def plain_row(title, subtitle=None):
    """An Adw.ActionRow whose title and subtitle are text, never markup ("Wi-Fi & Cellular", an app's own name)."""
    row = Adw.ActionRow()
    row.set_use_markup(False)
    row.set_title(title)
    if subtitle is not None:
        row.set_subtitle(subtitle)
    return row
