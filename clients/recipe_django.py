"""Recipe of docs/applications.md: Django 5.2, the ID made by the database (db_default), also from bulk_create."""
from django.db import models


class SnowflakeField(models.BigAutoField):
    """A bigint key the database fills in (db_default): like any AutoField, Django leaves it
    out of INSERTs and reads it back with RETURNING, from create() and bulk_create() alike."""

    def db_type_suffix(self, connection):
        return None  # no GENERATED ... AS IDENTITY: the column's default is next_id

    def get_default(self):
        return None  # unsaved objects have pk None (not DatabaseDefault), as AutoFields do


def next_id(shard: int, sequence: str) -> models.Func:
    return models.Func(models.Value(shard), models.Value(sequence), function="next_id",
                       output_field=models.BigIntegerField())


class Item(models.Model):
    id = SnowflakeField(primary_key=True, db_default=next_id(5, "dj_item_seq"))
    body = models.TextField()

    class Meta:
        app_label = "recipes"
        db_table = "dj_item"

# In a migration, before CreateModel: migrations.RunSQL("CREATE SEQUENCE dj_item_seq")
