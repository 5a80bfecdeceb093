# SPDX-License-Identifier: LGPL-2.1-or-later
# The bus face's test client (BusFaceTests), run by /usr/bin/python3 (GLib's bindings) inside the test's systemd
# container, as whichever user the test says:
#   compare SOCKET METHOD [ARGS...]: one process asks the socket and the bus; prints {"socket":...,"bus":...}.
#     METHOD Query is QUERY; QueryApp APP is QUERY APP (the bus's everyone view); GetReport is REPORT. compare-agent: the same while
#     this process is an agent on the socket too (SUBSCRIBE prompts), so that an ask is awaiting-decision.
#   race SOCKET: subscribes to links on the socket and to LinkChanged on the bus, prints "ready", then the
#     monotonic times (s) the first link event came by each: {"socket":T,"bus":T}.
#   signal SOCKET NAME: an agent on the socket (SUBSCRIBE prompts) that listens for the bus's signal NAME; prints
#     "ready", then {"got":true} when it came (false after 10 s).
#   follow SOCKET APP: SUBSCRIBE mine on the socket and Subscribe(["mine"], false) on the bus, hearing every
#     AppChanged whoever it is addressed to (only what is sent to this process can come); prints "ready" once
#     both snapshots came, then, once APP's app event and AppChanged have both come, {"socket":EVENT,"bus":SIGNAL,
#     "socket_at":T,"bus_at":T,"signals":N} (N: the AppChanged signals heard by then, any app's).
#   prompt SOCKET: the same for prompts: an agent on the socket (SUBSCRIBE prompts) and on the bus (Subscribe
#     (["prompts"], false)); "ready", then {"socket":EVENT,"bus":[CHANGE,BODY],"socket_at":T,"bus_at":T} for the
#     first prompt raised.
#   agent: an agent on the bus alone (Subscribe(["prompts"], false), nothing of the socket's), as whichever user
#     runs it; prints "ready" once its Snapshot came, then {"change":CHANGE,"prompt":BODY} for each PromptChanged.
#   forge VICTIM: on a connection of its own, calls Decide(asked, wwan, deny, once=false, everyone=true) with a
#     SENDER header field naming VICTIM's unique name, without interactive authorization; prints
#     {"me":UNIQUE,"reply":"return"|"error","error":NAME,"message":TEXT}.
#   flood SECONDS RATE: one connection sends GetStatus calls at RATE a second and never reads a reply; prints
#     how many it sent.
#   listen TOPICS EVERYONE MEMBER...: hears the signals MEMBER... of the daemon's object (broadcast, or unicast to
#     this process); TOPICS "-": no Subscribe, else Subscribe(TOPICS split at ",", EVERYONE == "true") first; prints
#     "ready" once the match is in place (and a subscription's Snapshot came), then {"member":M,"args":[...]} for
#     each signal heard, in order. A line "unsubscribe" on stdin calls Unsubscribe, printing {"unsubscribed":REPLY}.
import json, socket, sys, time
from gi.repository import Gio, GLib

NAME, PATH, IFACE = "org.netpermd.NetPerm1", "/org/netpermd/NetPerm1", "org.netpermd.NetPerm1"


def ask_socket(path, line):
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    s.sendall(line.encode() + b"\n")
    data = b""
    while not data.endswith(b"\n"):
        data += s.recv(65536)
    return json.loads(data)


def compare(path, method, args):
    bus = Gio.bus_get_sync(Gio.BusType.SYSTEM, None)
    if method == "Query":
        line, params = "QUERY", None
    elif method == "GetReport":
        line, params = "REPORT", GLib.Variant("(sb)", ("", False))
    else:
        line, params = "QUERY " + args[0], GLib.Variant("(sb)", (args[0], True))
    reply = bus.call_sync(NAME, PATH, IFACE, method, params, None, Gio.DBusCallFlags.NONE, 10000, None)
    print(json.dumps({"socket": ask_socket(path, line), "bus": reply.unpack()[0]}))


def race(path):
    loop = GLib.MainLoop()
    times = {}
    bus = Gio.bus_get_sync(Gio.BusType.SYSTEM, None)

    def on_bus(*_):
        times.setdefault("bus", time.monotonic())
        done()

    bus.signal_subscribe(NAME, IFACE, "LinkChanged", PATH, None, Gio.DBusSignalFlags.NONE, on_bus)
    def on_socket(event):
        if event.get("event") == "link":
            times.setdefault("socket", time.monotonic())
        done()

    def done():
        if len(times) == 2:
            loop.quit()

    conn = socket_events(path, b"SUBSCRIBE links\n", on_socket)  # noqa: F841 (kept open while the loop runs)
    # The match is in place once the bus has answered a call made after it.
    bus.call_sync("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "GetId", None, None,
                  Gio.DBusCallFlags.NONE, 5000, None)
    print("ready", flush=True)
    GLib.timeout_add_seconds(10, loop.quit)
    loop.run()
    print(json.dumps(times), flush=True)


def signal(path, name):
    loop = GLib.MainLoop()
    got = [False]
    bus = Gio.bus_get_sync(Gio.BusType.SYSTEM, None)

    def on_bus(*_):
        got[0] = True
        loop.quit()

    bus.signal_subscribe(NAME, IFACE, name, PATH, None, Gio.DBusSignalFlags.NONE, on_bus)
    agent = socket.socket(socket.AF_UNIX)
    agent.connect(path)
    agent.sendall(b"SUBSCRIBE prompts\n")
    agent.recv(65536)
    bus.call_sync("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "GetId", None, None,
                  Gio.DBusCallFlags.NONE, 5000, None)
    print("ready", flush=True)
    GLib.timeout_add_seconds(10, loop.quit)
    loop.run()
    print(json.dumps({"got": got[0]}), flush=True)


def socket_events(path, request, on_event):
    """Sends `request` on a new connection to the daemon's socket and hands each line it answers, as JSON, to
    `on_event` from the main loop."""
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    s.sendall(request)
    buf = [b""]

    def on_socket(*_):
        buf[0] += s.recv(65536)
        *lines, buf[0] = buf[0].split(b"\n")
        for line in lines:
            on_event(json.loads(line))
        return True

    GLib.io_add_watch(s.fileno(), GLib.IO_IN, on_socket)
    return s


def prompt(path):
    loop = GLib.MainLoop()
    got, ready = {}, set()
    bus = Gio.bus_get_sync(Gio.BusType.SYSTEM, None)

    def on_bus(_c, _sender, _path, _iface, member, params):
        if member == "Snapshot":
            ready.add("bus")
        elif member == "PromptChanged" and params.unpack()[0] == "prompt":
            got.setdefault("bus", (list(params.unpack()), time.monotonic()))
        done()

    bus.signal_subscribe(None, IFACE, None, PATH, None, Gio.DBusSignalFlags.NONE, on_bus)
    def on_socket(event):
        if event.get("event") == "snapshot":
            ready.add("socket")
        elif event.get("event") == "prompt":
            got.setdefault("socket", (event, time.monotonic()))
        done()

    def done():
        if ready == {"bus", "socket"}:
            print("ready", flush=True)
            ready.add("said")
        if len(got) == 2:
            print(json.dumps({"socket": got["socket"][0], "bus": got["bus"][0], "socket_at": got["socket"][1],
                              "bus_at": got["bus"][1]}), flush=True)
            loop.quit()

    conn = socket_events(path, b"SUBSCRIBE prompts\n", on_socket)  # noqa: F841 (kept open while the loop runs)
    bus.call_sync(NAME, PATH, IFACE, "Subscribe", GLib.Variant("(asb)", (["prompts"], False)), None,
                  Gio.DBusCallFlags.NONE, 10000, None)
    GLib.timeout_add_seconds(20, loop.quit)
    loop.run()


def agent():
    loop = GLib.MainLoop()
    bus = Gio.bus_get_sync(Gio.BusType.SYSTEM, None)

    def on_bus(_c, _sender, _path, _iface, member, params):
        if member == "Snapshot":
            print("ready", flush=True)
        elif member == "PromptChanged":
            change, body = params.unpack()
            print(json.dumps({"change": change, "prompt": body}), flush=True)

    bus.signal_subscribe(NAME, IFACE, None, PATH, None, Gio.DBusSignalFlags.NONE, on_bus)
    bus.call_sync(NAME, PATH, IFACE, "Subscribe", GLib.Variant("(asb)", (["prompts"], False)), None,
                  Gio.DBusCallFlags.NONE, 10000, None)
    loop.run()


def follow(path, app):
    loop = GLib.MainLoop()
    got, signals, ready = {}, [0], set()
    bus = Gio.bus_get_sync(Gio.BusType.SYSTEM, None)

    def on_bus(_c, _sender, _path, _iface, member, params):
        if member == "Snapshot":
            ready.add("bus")
            check_ready()
            return
        signals[0] += 1
        body = params.unpack()[0]
        if body.get("app") == app:
            got.setdefault("bus", (body, time.monotonic()))
            done()

    # No sender and no destination in the match: a broadcast of anyone's would be heard too.
    bus.signal_subscribe(None, IFACE, None, PATH, None, Gio.DBusSignalFlags.NONE,
                         lambda c, s, p, i, m, v: m in ("AppChanged", "Snapshot") and on_bus(c, s, p, i, m, v))
    def on_socket(event):
        if event.get("event") == "snapshot":
            ready.add("socket")
            check_ready()
        elif event.get("event") == "app" and event.get("app") == app:
            got.setdefault("socket", (event, time.monotonic()))
        done()

    def check_ready():
        if ready == {"bus", "socket"}:
            print("ready", flush=True)
            ready.add("said")

    def done():
        if len(got) == 2:
            print(json.dumps({"socket": got["socket"][0], "bus": got["bus"][0], "socket_at": got["socket"][1],
                              "bus_at": got["bus"][1], "signals": signals[0]}), flush=True)
            loop.quit()

    conn = socket_events(path, b"SUBSCRIBE mine\n", on_socket)  # noqa: F841 (kept open while the loop runs)
    bus.call_sync(NAME, PATH, IFACE, "Subscribe", GLib.Variant("(asb)", (["mine"], False)), None,
                  Gio.DBusCallFlags.NONE, 10000, None)
    GLib.timeout_add_seconds(20, loop.quit)
    loop.run()


def flood(seconds, rate):
    address = Gio.dbus_address_get_for_bus_sync(Gio.BusType.SYSTEM, None)
    path = address.split("path=")[1].split(",")[0].split(";")[0]
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    import os
    s.sendall(b"\0AUTH EXTERNAL " + str(os.getuid()).encode().hex().encode() + b"\r\n")
    assert s.recv(4096).startswith(b"OK"), "the bus refused"
    s.sendall(b"BEGIN\r\n")

    def blob(serial, dest, path, iface, member):
        m = Gio.DBusMessage.new_method_call(dest, path, iface, member)
        m.set_serial(serial)
        return m.to_blob(Gio.DBusCapabilityFlags.NONE)

    s.sendall(blob(1, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "Hello"))
    s.setblocking(False)
    # One call made once, its serial (bytes 8-11, in the message's own byte order) changed for each: the sender's
    # own work is next to nothing, so the rate it reaches is what the bus takes.
    call = bytearray(blob(2, NAME, PATH, IFACE, "GetStatus"))
    order = "little" if call[0:1] == b"l" else "big"
    # Due calls go out together; what the socket did not take waits in `out`, and nothing new is made meanwhile.
    sent, start, out = 0, time.monotonic(), b""
    while time.monotonic() - start < seconds:
        due = int((time.monotonic() - start) * rate)
        batch = []
        while sent + len(batch) < due and not out and len(batch) < 500:
            call[8:12] = (2 + sent + len(batch)).to_bytes(4, order)
            batch.append(bytes(call))
        sent += len(batch)
        out = out + b"".join(batch)
        if out:
            try:
                out = out[s.send(out):]
            except BlockingIOError:
                pass
        time.sleep(0.001)
    elapsed = time.monotonic() - start
    unsent = -(-len(out) // len(call))  # what never left whole is not sent
    print(json.dumps({"sent": sent - unsent, "rate": round((sent - unsent) / elapsed), "unsent": unsent}), flush=True)


def listen(topics, everyone, members):
    loop = GLib.MainLoop()
    bus = Gio.bus_get_sync(Gio.BusType.SYSTEM, None)

    def on_bus(_c, _sender, _path, _iface, member, params):
        if member == "Snapshot" and topics != "-":
            print("ready", flush=True)
        if member in members:
            print(json.dumps({"member": member, "args": list(params.unpack())}), flush=True)

    bus.signal_subscribe(NAME, IFACE, None, PATH, None, Gio.DBusSignalFlags.NONE, on_bus)

    def on_stdin(*_):
        line = sys.stdin.readline()
        if not line:
            loop.quit()
            return False
        if line.strip() == "unsubscribe":
            reply = bus.call_sync(NAME, PATH, IFACE, "Unsubscribe", None, None, Gio.DBusCallFlags.NONE, 10000, None)
            print(json.dumps({"unsubscribed": reply.unpack()[0]}), flush=True)
        return True

    GLib.io_add_watch(sys.stdin.fileno(), GLib.IO_IN | GLib.IO_HUP, on_stdin)
    if topics == "-":
        # The match is in place once the bus has answered a call made after it.
        bus.call_sync("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "GetId", None, None,
                      Gio.DBusCallFlags.NONE, 5000, None)
        print("ready", flush=True)
    else:
        bus.call_sync(NAME, PATH, IFACE, "Subscribe", GLib.Variant("(asb)", (topics.split(","), everyone == "true")),
                      None, Gio.DBusCallFlags.NONE, 10000, None)
    loop.run()


def raw_bus():
    """A connection to the system bus of our own, authenticated as our uid, no Hello sent yet."""
    import os
    address = Gio.dbus_address_get_for_bus_sync(Gio.BusType.SYSTEM, None)
    s = socket.socket(socket.AF_UNIX)
    s.connect(address.split("path=")[1].split(",")[0].split(";")[0])
    s.sendall(b"\0AUTH EXTERNAL " + str(os.getuid()).encode().hex().encode() + b"\r\n")
    assert s.recv(4096).startswith(b"OK"), "the bus refused"
    s.sendall(b"BEGIN\r\n")
    return s


def read_reply(s, buf, serial):
    """The reply to `serial` (other messages skipped), as a Gio.DBusMessage; 10 s at most."""
    s.settimeout(10)
    while True:
        while len(buf[0]) < 16 or len(buf[0]) < Gio.DBusMessage.bytes_needed(buf[0][:16]):
            buf[0] += s.recv(65536)
        n = Gio.DBusMessage.bytes_needed(buf[0][:16])
        m = Gio.DBusMessage.new_from_blob(buf[0][:n], Gio.DBusCapabilityFlags.NONE)
        buf[0] = buf[0][n:]
        if m.get_reply_serial() == serial:
            return m


def forge(victim):
    s, buf = raw_bus(), [b""]
    hello = Gio.DBusMessage.new_method_call("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "Hello")
    hello.set_serial(1)
    s.sendall(hello.to_blob(Gio.DBusCapabilityFlags.NONE))
    me = read_reply(s, buf, 1).get_body().unpack()[0]
    call = Gio.DBusMessage.new_method_call(NAME, PATH, IFACE + ".Decisions", "Decide")
    call.set_body(GLib.Variant("(sssbb)", ("asked", "wwan", "deny", False, True)))
    call.set_sender(victim)
    call.set_serial(2)
    s.sendall(call.to_blob(Gio.DBusCapabilityFlags.NONE))
    r = read_reply(s, buf, 2)
    error = r.get_message_type() == Gio.DBusMessageType.ERROR
    body = r.get_body().unpack() if r.get_body() is not None else ()
    print(json.dumps({"me": me, "reply": "error" if error else "return", "error": r.get_error_name() or "",
                      "message": str(body[0]) if body else ""}), flush=True)


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "compare":
        compare(sys.argv[2], sys.argv[3], sys.argv[4:])
    elif cmd == "compare-agent":
        agent = socket.socket(socket.AF_UNIX)
        agent.connect(sys.argv[2])
        agent.sendall(b"SUBSCRIBE prompts\n")
        agent.recv(65536)
        compare(sys.argv[2], sys.argv[3], sys.argv[4:])
    elif cmd == "race":
        race(sys.argv[2])
    elif cmd == "signal":
        signal(sys.argv[2], sys.argv[3])
    elif cmd == "prompt":
        prompt(sys.argv[2])
    elif cmd == "agent":
        agent()
    elif cmd == "follow":
        follow(sys.argv[2], sys.argv[3])
    elif cmd == "forge":
        forge(sys.argv[2])
    elif cmd == "listen":
        listen(sys.argv[2], sys.argv[3], set(sys.argv[4:]))
    elif cmd == "flood":
        flood(float(sys.argv[2]), int(sys.argv[3]))
