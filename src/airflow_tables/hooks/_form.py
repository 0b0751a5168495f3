"""The connection form of a ``datatables`` connection, for Airflow before 3.2.

Later versions read the form from the provider info's ``conn-fields``
(:func:`airflow_tables.get_provider_info`); both are made from that one literal dict.
"""

from __future__ import annotations

from typing import Any


class ConnectionForm:
    """``get_ui_field_behaviour`` and ``get_connection_form_widgets`` from the provider info."""

    conn_type: str

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        behaviour = cls._connection_type()["ui-field-behaviour"]
        return {
            "hidden_fields": behaviour["hidden-fields"],
            "relabeling": behaviour["relabeling"],
            "placeholders": behaviour["placeholders"],
        }

    @classmethod
    def get_connection_form_widgets(cls) -> dict[str, Any]:
        from flask_appbuilder.fieldwidgets import BS3TextFieldWidget
        from wtforms import StringField

        fields = cls._connection_type()["conn-fields"]
        return {
            name: StringField(f["label"], widget=BS3TextFieldWidget(), description=f.get("description"))
            for name, f in fields.items()
        }

    @classmethod
    def _connection_type(cls) -> dict:
        from airflow_tables import get_provider_info

        return next(c for c in get_provider_info()["connection-types"] if c["connection-type"] == cls.conn_type)
