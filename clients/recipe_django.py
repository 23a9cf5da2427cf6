"""README recipe: Django 5.2, the ID made by the database (db_default), also from bulk_create."""
from django.db import models


class SnowflakeField(models.BigIntegerField):
    # Django reads back from INSERT ... RETURNING only the fields marked db_returning (the
    # AutoFields); so that create() and bulk_create() both get the ID next_id made:
    db_returning = True


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
