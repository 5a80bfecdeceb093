# SPDX-License-Identifier: LGPL-2.1-or-later
"""A python-dbusmock template of ModemManager, as much as netpermd reads of it: an object manager at
/org/freedesktop/ModemManager1 whose modems have the Modem interface (Bearers, Ports) and Modem3gpp
(RegistrationState), and bearers (org.freedesktop.ModemManager1.Bearer: Interface, Connected) at paths of their own,
outside the object manager, as ModemManager exports them.

Test methods on org.freedesktop.DBus.Mock: AddModem(name, interface, state) adds a modem whose connected bearer's
interface is `interface` (its only port a control port, so the link is known by its bearer alone), registered in
`state` (MMModem3gppRegistrationState: 1 home, 5 roaming); SetRegistrationState(name, state) changes it and emits
PropertiesChanged; RemoveModem(name)."""

import dbus

from dbusmock import MOCK_IFACE, mockobject

BUS_NAME = "org.freedesktop.ModemManager1"
MAIN_OBJ = "/org/freedesktop/ModemManager1"
MAIN_IFACE = "org.freedesktop.ModemManager1"
SYSTEM_BUS = True
IS_OBJECT_MANAGER = True

MODEM_IFACE = "org.freedesktop.ModemManager1.Modem"
MODEM_3GPP_IFACE = "org.freedesktop.ModemManager1.Modem.Modem3gpp"
BEARER_IFACE = "org.freedesktop.ModemManager1.Bearer"
PORT_TYPE_QMI = 6


def load(mock, _parameters):
    mock.AddProperties(MAIN_IFACE, {"Version": "1.20.0"})


def modem_path(name):
    return MAIN_OBJ + "/Modem/" + name


def bearer_path(name):
    return MAIN_OBJ + "/Bearer/" + name


@dbus.service.method(MOCK_IFACE, in_signature="ssu", out_signature="o")
def AddModem(self, name, interface, state):
    bearer = bearer_path(name)
    # dbusmock's GetManagedObjects lists every object under its path, this bearer too (ModemManager's does not):
    # an object without the Modem interface, which netpermd must skip.
    self.AddObject(bearer, BEARER_IFACE, {"Interface": interface, "Connected": True,
                                          "Suspended": False}, [])
    path = modem_path(name)
    self.AddObject(path, MODEM_IFACE, {
        "Bearers": dbus.Array([dbus.ObjectPath(bearer)], signature="o"),
        "Ports": dbus.Array([dbus.Struct(("cdc-wdm" + name, dbus.UInt32(PORT_TYPE_QMI)), signature="su")],
                            signature="(su)"),
        "PrimaryPort": "cdc-wdm" + name,
        "State": dbus.Int32(11),
    }, [])
    modem = mockobject.objects[path]
    modem.AddProperties(MODEM_3GPP_IFACE, {"RegistrationState": dbus.UInt32(state), "OperatorName": "Test"})
    self.object_manager_emit_added(path)
    return path


@dbus.service.method(MOCK_IFACE, in_signature="su", out_signature="")
def SetRegistrationState(_self, name, state):
    mockobject.objects[modem_path(name)].Set(MODEM_3GPP_IFACE, "RegistrationState", dbus.UInt32(state))


@dbus.service.method(MOCK_IFACE, in_signature="s", out_signature="")
def RemoveModem(self, name):
    self.object_manager_emit_removed(modem_path(name))
    self.RemoveObject(modem_path(name))
    self.RemoveObject(bearer_path(name))
