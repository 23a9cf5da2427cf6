"""Recipe of docs/applications.md: psycopg 3 + SQLAlchemy 2, the ID made by the database (server_default)."""
from sqlalchemy import DDL, BigInteger, create_engine, event, text
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column


class Base(DeclarativeBase):
    pass


class Item(Base):
    __tablename__ = "sa_item"
    id: Mapped[int] = mapped_column(
        BigInteger, primary_key=True, server_default=text("next_id(5, 'sa_item_seq')"))
    body: Mapped[str]


# The sequence next_id keeps its state in, created with the table.
event.listen(Item.__table__, "before_create", DDL("CREATE SEQUENCE IF NOT EXISTS sa_item_seq"))


def demo(url: str) -> tuple[Item, list[Item]]:
    engine = create_engine(url)  # e.g. "postgresql+psycopg://app@db/app"
    Base.metadata.create_all(engine)
    with Session(engine, expire_on_commit=False) as session:
        one = Item(body="one")
        session.add(one)
        session.flush()                      # INSERT ... RETURNING sa_item.id
        many = [Item(body=f"bulk {i}") for i in range(2000)]
        session.add_all(many)
        session.flush()                      # one multi-row INSERT ... RETURNING per batch
        session.commit()
        return one, many
