"""The PinLater IDL, pinlater.thrift: package data, read through importlib.resources
(pinledger.idl). Not an import name of its own: always `pinledger.thrift`.
"""
